#!/usr/bin/env python3
"""python_packaging_test: the in-tree PEP 517 backend builds a valid wheel (METADATA,
WHEEL, RECORD with correct sha256 hashes, every module) and an sdist, and, when pip is
available, `pip install --no-index` of bindings/python works offline and the installed
package imports. Usage: packaging_test.py <bindings/python folder>."""
import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: %s" % what, flush=True)


def main():
    src = os.path.abspath(sys.argv[1])
    sys.path.insert(0, os.path.join(src, "_build"))
    import collx_build

    modules = sorted(f for f in os.listdir(os.path.join(src, "collx")) if f.endswith(".py"))
    with tempfile.TemporaryDirectory() as tmp:
        name = collx_build.build_wheel(tmp)
        version = collx_build._version()
        check(name == "collx-%s-py3-none-any.whl" % version, "wheel name %s" % name)
        with zipfile.ZipFile(os.path.join(tmp, name)) as zf:
            names = set(zf.namelist())
            di = "collx-%s.dist-info/" % version
            for m in modules:
                check("collx/" + m in names, "wheel lacks collx/%s" % m)
            for f in ("METADATA", "WHEEL", "RECORD"):
                check(di + f in names, "wheel lacks %s" % f)
            meta = zf.read(di + "METADATA").decode()
            check("Name: collx\n" in meta and ("Version: %s\n" % version) in meta,
                  "METADATA: %s" % meta[:200])
            check("Root-Is-Purelib: true" in zf.read(di + "WHEEL").decode(), "WHEEL file")
            rows = list(csv.reader(io.StringIO(zf.read(di + "RECORD").decode())))
            recorded = {r[0] for r in rows}
            check(recorded == names, "RECORD lists %s, zip has %s" % (sorted(recorded), sorted(names)))
            for path, digest, size in rows:
                if path == di + "RECORD":
                    check(digest == "" and size == "", "RECORD's own row")
                    continue
                data = zf.read(path)
                want = "sha256=" + base64.urlsafe_b64encode(
                    hashlib.sha256(data).digest()).rstrip(b"=").decode()
                check(digest == want and int(size) == len(data), "RECORD hash/size of %s" % path)
        sdist = collx_build.build_sdist(tmp)
        with tarfile.open(os.path.join(tmp, sdist)) as tf:
            members = set(tf.getnames())
        base = "collx-%s/" % version
        for f in ["PKG-INFO", "pyproject.toml", "_build/collx_build.py"] + ["collx/" + m for m in modules]:
            check(base + f in members, "sdist lacks %s" % f)

        if subprocess.run([sys.executable, "-m", "pip", "--version"],
                          capture_output=True).returncode != 0:
            print("pip not available: skipping the pip install check", flush=True)
        else:
            target = os.path.join(tmp, "site")
            env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            env.pop("PYTHONPATH", None)
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                                "--target", target, src], env=env, capture_output=True,
                               text=True, timeout=100)
            check(r.returncode == 0, "pip install --no-index failed:\n%s%s" % (r.stdout, r.stderr))
            env["PYTHONPATH"] = target
            r = subprocess.run([sys.executable, "-c",
                                "import collx; print(collx.__file__, collx.version())"],
                               env=env, capture_output=True, text=True, timeout=60, cwd=tmp)
            check(r.returncode == 0 and r.stdout.startswith(os.path.join(target, "collx")),
                  "installed collx does not import from %s: %s%s" % (target, r.stdout, r.stderr))
            print("pip-installed package: %s" % r.stdout.strip(), flush=True)
    if FAILURES:
        print("%d failure(s)" % len(FAILURES), flush=True)
        return 1
    print("all passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
