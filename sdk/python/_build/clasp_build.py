"""A PEP 517 build backend for the clasp package in the standard library
alone: it writes the wheel (pure Python) and the sdist with zipfile and
tarfile, so `pip install ./sdk/python` works offline, with no setuptools or
wheel package (pip's build isolation needs nothing from a registry)."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, DIST, VERSION = "clasp-client", "clasp_client", "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"

METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: Python client of the clasp coordination server
License: Apache-2.0
Requires-Python: >=3.9
Classifier: Typing :: Typed
"""


def _package_files():
    pkg = os.path.join(ROOT, "clasp")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            yield f"clasp/{name}", os.path.join(pkg, name)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _write_wheel(directory, editable=False):
    info = f"{DIST}-{VERSION}.dist-info"
    path = os.path.join(directory, f"{DIST}-{VERSION}-{TAG}.whl")
    records = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arc, data):
            z.writestr(zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0)), data)
            records.append(_record_line(arc, data))
        if editable:
            add(f"{DIST}.pth", (ROOT + "\n").encode())
        else:
            for arc, src in _package_files():
                with open(src, "rb") as f:
                    add(arc, f.read())
        add(f"{info}/METADATA", METADATA.encode())
        add(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: clasp_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode())
        add(f"{info}/top_level.txt", b"clasp\n")
        z.writestr(f"{info}/RECORD", "\n".join(records + [f"{info}/RECORD,,"]) + "\n")
    return os.path.basename(path)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{VERSION}"
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/clasp_build.py"] + [a for a, _ in _package_files()]:
            t.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        data = (METADATA).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return os.path.basename(path)
