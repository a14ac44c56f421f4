"""Listing and small-file I/O on local paths or any Hadoop-compatible URI.

Local paths use the OS directly; other URIs (hdfs://, s3a://, abfs://, ...) go through the
JVM's ``org.apache.hadoop.fs.FileSystem`` of the running SparkSession, so whatever
connectors the cluster has configured work here too.  Only metadata (names, sizes,
times) and small files (checkpoints, ``meta.properties``, ``summary.json``) pass through
the driver; segment bytes are read by executors.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import urlparse


class InputError(Exception):
    """A path the user gave cannot be used; the message says what to fix (exit status 2)."""


@dataclass(frozen=True)
class FileInfo:
    """One listed file: ``uri`` (absolute, with scheme), ``size`` bytes, ``mtime_ms`` epoch ms."""

    uri: str
    size: int
    mtime_ms: int


def is_local(path: str) -> bool:
    """True for plain paths and ``file:`` URIs."""
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    """``file:/a/b``, ``file:///a/b`` or ``/a/b`` -> ``/a/b``.

    The prefix is cut rather than URL-parsed: the URIs here are built from listed names, so a
    ``#`` or ``?`` in a directory name is part of the path, not a fragment or query.
    """
    if not uri.startswith("file:"):
        return uri
    rest = uri[len("file:"):]
    if rest.startswith("//"):
        rest = rest[2:]
        rest = rest[rest.index("/"):] if "/" in rest else "/"  # drop an authority (file://host/a)
    return rest


def to_uri(path: str) -> str:
    """Absolute ``file:`` URI for a local path; other URIs unchanged."""
    if is_local(path):
        return "file:" + os.path.abspath(local_path(path))
    return path


def _hadoop(spark, uri: str):
    jvm = spark._jvm
    p = jvm.org.apache.hadoop.fs.Path(uri)
    return p.getFileSystem(spark._jsc.hadoopConfiguration()), p


def list_files(spark, root: str) -> list[FileInfo]:
    """Every file below ``root`` (recursively).

    Raises :class:`InputError` when ``root`` does not exist or is not a directory.
    """
    if is_local(root):
        base = os.path.abspath(local_path(root))
        if not os.path.exists(base):
            raise InputError(f"log dir {root!r} does not exist: give the path of a broker's log.dirs directory (or a folder of them)")
        if not os.path.isdir(base):
            raise InputError(f"log dir {root!r} is a file, not a directory: give the broker's log.dirs directory")
        out = []
        for dirpath, _dirs, files in os.walk(base):
            for f in files:
                full = os.path.join(dirpath, f)
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                out.append(FileInfo("file:" + full, st.st_size, int(st.st_mtime * 1000)))
        return out
    fs, p = _hadoop(spark, root)
    if not fs.exists(p):
        raise InputError(f"log dir {root!r} does not exist on its filesystem")
    if not fs.getFileStatus(p).isDirectory():
        raise InputError(f"log dir {root!r} is a file, not a directory")
    it = fs.listFiles(p, True)
    out = []
    while it.hasNext():
        st = it.next()
        out.append(FileInfo(st.getPath().toString(), int(st.getLen()), int(st.getModificationTime())))
    return out


def read_small(spark, uri: str, limit: int = 1 << 20) -> bytes:
    """Bytes of a small file (at most ``limit`` bytes are read)."""
    if is_local(uri):
        with open(local_path(uri), "rb") as fh:
            return fh.read(limit)
    fs, p = _hadoop(spark, uri)
    stream = fs.open(p)
    try:
        return bytes(spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))[:limit]
    finally:
        stream.close()


def write_small(spark, uri: str, data: bytes) -> None:
    """Write a small file (overwriting; a local file is replaced atomically: written beside, then renamed)."""
    if is_local(uri):
        path = local_path(uri)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return
    fs, p = _hadoop(spark, uri)
    out = fs.create(p, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()


def exists(spark, uri: str) -> bool:
    if is_local(uri):
        return os.path.exists(local_path(uri))
    fs, p = _hadoop(spark, uri)
    return bool(fs.exists(p))


def delete(spark, uri: str) -> None:
    """Delete recursively if present."""
    if is_local(uri):
        import shutil
        path = local_path(uri)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        return
    fs, p = _hadoop(spark, uri)
    if fs.exists(p):
        fs.delete(p, True)


def rename(spark, src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` (atomic on local filesystems and HDFS)."""
    if is_local(src):
        os.replace(local_path(src), local_path(dst))
        return
    fs, p = _hadoop(spark, src)
    if not fs.rename(p, spark._jvm.org.apache.hadoop.fs.Path(dst)):
        raise OSError(f"could not rename {src} to {dst}")


def read_json(spark, uri: str, limit: int = 64 << 20):
    """Parsed JSON of a small file on any filesystem; None when it does not exist."""
    if not exists(spark, uri):
        return None
    return json.loads(read_small(spark, uri, limit).decode("utf-8"))


def upload(spark, local: str, uri: str) -> None:
    """Copy a local file or directory (recursively) to ``uri`` on its Hadoop filesystem, replacing it."""
    fs, dst = _hadoop(spark, uri)
    fs.copyFromLocalFile(False, True, spark._jvm.org.apache.hadoop.fs.Path("file:" + os.path.abspath(local)), dst)


def children(spark, uri: str) -> list[str] | None:
    """Names directly inside a directory; None when ``uri`` does not exist.
    Raises NotADirectoryError when it is a file."""
    if is_local(uri):
        path = local_path(uri)
        if not os.path.exists(path):
            return None
        return os.listdir(path)  # NotADirectoryError for a file
    fs, p = _hadoop(spark, uri)
    if not fs.exists(p):
        return None
    if not fs.getFileStatus(p).isDirectory():
        raise NotADirectoryError(uri)
    return [st.getPath().getName() for st in fs.listStatus(p)]


def mkdirs(spark, uri: str) -> None:
    """Create a directory and its parents (no error when it exists)."""
    if is_local(uri):
        os.makedirs(local_path(uri), exist_ok=True)
        return
    fs, p = _hadoop(spark, uri)
    fs.mkdirs(p)
