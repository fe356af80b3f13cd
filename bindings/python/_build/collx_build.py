"""A minimal PEP 517 / PEP 660 build backend using only the standard library.

collx is pure Python (ctypes), so a wheel is a zip of collx/*.py plus the .dist-info
files (METADATA, WHEEL, RECORD with sha256 hashes). The version is read from
collx/__init__.py (__version__), the single source of truth.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

NAME = "collx"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_DIR = os.path.join(ROOT, NAME)
SUMMARY = "Python (ctypes) bindings for the collx collective-communication library"
TAG = "py3-none-any"


def _version():
    with open(os.path.join(PKG_DIR, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("collx_build: no __version__ in collx/__init__.py")
    return m.group(1)


def _metadata():
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % NAME,
        "Version: %s" % _version(),
        "Summary: %s" % SUMMARY,
        "License: see the collx repository",
        "Requires-Python: >=3.8",
        "Provides-Extra: numpy",
        "Requires-Dist: numpy; extra == \"numpy\"",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + readme


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: collx_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG)


def _package_files():
    """(archive name, absolute path) of every module in the package, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(PKG_DIR):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith(".py") or fn == "py.typed":
                full = os.path.join(dirpath, fn)
                out.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    return out


def _dist_info():
    return "%s-%s.dist-info" % (NAME, _version())


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _write_wheel(wheel_directory, entries, editable=False):
    """entries: list of (archive name, bytes). Adds the .dist-info and RECORD."""
    dist_info = _dist_info()
    entries = list(entries) + [
        (dist_info + "/METADATA", _metadata().encode("utf-8")),
        (dist_info + "/WHEEL", _wheel_file().encode("utf-8")),
        (dist_info + "/top_level.txt", (NAME + "\n").encode("utf-8")),
    ]
    record_name = dist_info + "/RECORD"
    record = io.StringIO()
    for name, data in entries:
        record.write("%s,%s,%d\n" % (name, _record_hash(data), len(data)))
    record.write("%s,,\n" % record_name)
    entries.append((record_name, record.getvalue().encode("utf-8")))

    filename = "%s-%s-%s.whl" % (NAME, _version(), TAG)
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, filename)
    stamp = time.gmtime(max(315532800, int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))))[:6]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return filename


# -- PEP 517 hooks ----------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(dist_info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    with open(os.path.join(dist_info, "top_level.txt"), "w", encoding="utf-8") as f:
        f.write(NAME + "\n")
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = []
    for name, full in _package_files():
        with open(full, "rb") as f:
            entries.append((name, f.read()))
    return _write_wheel(wheel_directory, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel whose .pth file puts this source folder on sys.path."""
    pth = (ROOT + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % NAME, pth)])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    filename = base + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("_build/collx_build.py", os.path.abspath(__file__))]
    if os.path.exists(os.path.join(ROOT, "README.md")):
        files.append(("README.md", os.path.join(ROOT, "README.md")))
    files += _package_files()
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        pkg_info = _metadata().encode("utf-8")
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        info.mtime = int(time.time())
        info.mode = 0o644
        tf.addfile(info, io.BytesIO(pkg_info))
        for arcname, full in files:
            tf.add(full, arcname="%s/%s" % (base, arcname), recursive=False)
    return filename
