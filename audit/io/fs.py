"""Listing and small-file I/O on local paths or any Hadoop-compatible URI.

Local paths use the OS directly; other URIs (hdfs://, s3a://, abfs://, ...) go through the
JVM's ``org.apache.hadoop.fs.FileSystem`` of the running SparkSession, so whatever
connectors the cluster has configured work here too.  A Spark Connect client has no JVM: there
local paths are on a filesystem the client shares with the Connect server, and ``s3a://`` (and
``s3://``) URIs go through ``pyarrow.fs``; other schemes are refused with :class:`InputError`.  Only metadata (names, sizes,
times) and small files (checkpoints, ``meta.properties``, ``summary.json``) pass through
the driver; segment bytes are read by executors.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from urllib.parse import urlparse


__all__ = [
    "ARROW_SCHEMES",
    "FileInfo",
    "InputError",
    "children",
    "delete",
    "exchange",
    "exists",
    "is_local",
    "list_files",
    "local_path",
    "mkdirs",
    "parquet_files",
    "read_parquet",
    "read_json",
    "read_small",
    "rename",
    "to_uri",
    "upload",
    "write_small",
]


class InputError(Exception):
    """A path the user gave cannot be used; the message says what to fix (exit status 2)."""


@dataclass(frozen=True)
class FileInfo:
    """One listed file: ``uri`` (absolute, with scheme), ``size`` bytes, ``mtime_ms`` epoch ms."""

    uri: str
    size: int
    mtime_ms: int


def is_local(path: str) -> bool:
    """Tell whether ``path`` is a plain path or a ``file:`` URI."""
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def local_path(uri: str) -> str:
    """``file:/a/b``, ``file:///a/b`` or ``/a/b`` -> ``/a/b``.

    The prefix is cut rather than URL-parsed: the URIs here are built from listed names, so a
    ``#`` or ``?`` in a directory name is part of the path, not a fragment or query.
    """
    if not uri.startswith("file:"):
        return uri
    rest = uri[len("file:") :]
    if rest.startswith("//"):
        rest = rest[2:]
        rest = rest[rest.index("/") :] if "/" in rest else "/"  # drop an authority (file://host/a)
    return rest


def to_uri(path: str) -> str:
    """Absolute ``file:`` URI for a local path; other URIs unchanged."""
    if is_local(path):
        return "file:" + os.path.abspath(local_path(path))
    return path


class _HadoopStore:
    """A Hadoop URI through the driver JVM's ``org.apache.hadoop.fs.FileSystem`` (py4j)."""

    def __init__(self, spark, uri: str):
        self.spark = spark
        self.path = spark._jvm.org.apache.hadoop.fs.Path(uri)
        self.fs = self.path.getFileSystem(spark._jsc.hadoopConfiguration())

    def _p(self, uri: str):
        return self.spark._jvm.org.apache.hadoop.fs.Path(uri)

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def is_dir(self) -> bool:
        return bool(self.fs.getFileStatus(self.path).isDirectory())

    def walk(self) -> list[FileInfo]:
        it = self.fs.listFiles(self.path, True)
        out = []
        while it.hasNext():
            st = it.next()
            out.append(FileInfo(st.getPath().toString(), int(st.getLen()), int(st.getModificationTime())))
        return out

    def names(self) -> list[str]:
        return [st.getPath().getName() for st in self.fs.listStatus(self.path)]

    def read(self, limit: int) -> bytes:
        stream = self.fs.open(self.path)
        try:
            return bytes(self.spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))[:limit]
        finally:
            stream.close()

    def write(self, data: bytes) -> None:
        out = self.fs.create(self.path, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

    def delete(self) -> None:
        if self.fs.exists(self.path):
            self.fs.delete(self.path, True)

    def rename(self, dst: str) -> bool:
        return bool(self.fs.rename(self.path, self._p(dst)))

    def mkdirs(self) -> None:
        self.fs.mkdirs(self.path)

    def upload(self, local: str) -> None:
        # file by file through create(), the stream Spark's own writers use: S3A's copyFromLocalFile sends
        # "Expect: 100-continue", which some S3-compatible stores (moto) answer in a way the AWS SDK rejects
        self.delete()
        base = os.path.abspath(local)
        files = (
            [(base, "")]
            if os.path.isfile(base)
            else [
                (os.path.join(d, f), os.path.relpath(os.path.join(d, f), base))
                for d, _dirs, names in os.walk(base)
                for f in names
            ]
        )
        root = self.path.toString().rstrip("/")
        for path, rel in files:
            out = self.fs.create(self._p(f"{root}/{rel}" if rel else root), True)
            try:
                with open(path, "rb") as fh:
                    while chunk := fh.read(1 << 20):
                        out.write(bytearray(chunk))
            finally:
                out.close()

    def nearest_existing_ancestor_is_file(self) -> str | None:
        p = self.path.getParent()
        while p is not None and not self.fs.exists(p):
            p = p.getParent()
        return p.toString() if p is not None and not self.fs.getFileStatus(p).isDirectory() else None


#: URI schemes a Spark Connect client reaches itself (it has no JVM), with ``pyarrow.fs``: the S3 API
ARROW_SCHEMES = {"s3a": "s3", "s3": "s3", "s3n": "s3"}


class _ArrowStore:
    """A URI of an object store through ``pyarrow.fs`` (for a Spark Connect client: no JVM here).

    ``s3a://`` and ``s3://`` both go to pyarrow's S3 filesystem, which takes its credentials, region and endpoint
    (``AWS_ENDPOINT_URL`` for an S3-compatible server) from the standard AWS environment and files.
    """

    def __init__(self, uri: str):
        from pyarrow import fs as pafs

        self.pafs = pafs
        scheme, _, rest = uri.partition("://")
        if scheme.lower() not in ARROW_SCHEMES:
            raise InputError(
                f"{uri!r}: over Spark Connect (--remote) this client reads and writes the output and the log dirs' "
                f"small files itself, without a JVM; it can reach local paths (a filesystem the Connect server "
                f"shares) and {', '.join(sorted(s + '://' for s in ARROW_SCHEMES))} URIs, not {scheme}://"
            )
        self.scheme = scheme
        self.fs = _arrow_s3()
        self.key = rest.rstrip("/")

    def _uri(self, key: str) -> str:
        return f"{self.scheme}://{key}"

    def _info(self, key=None):
        return self.fs.get_file_info(key or self.key)

    def exists(self) -> bool:
        return self._info().type != self.pafs.FileType.NotFound

    def is_dir(self) -> bool:
        return self._info().type == self.pafs.FileType.Directory

    def walk(self) -> list[FileInfo]:
        out = []
        for st in self.fs.get_file_info(self.pafs.FileSelector(self.key, recursive=True)):
            if st.type == self.pafs.FileType.File:
                mtime = st.mtime_ns // 1_000_000 if st.mtime_ns is not None else 0
                out.append(FileInfo(self._uri(st.path), int(st.size or 0), int(mtime)))
        return out

    def names(self) -> list[str]:
        return [st.base_name for st in self.fs.get_file_info(self.pafs.FileSelector(self.key, recursive=False))]

    def read(self, limit: int) -> bytes:
        with self.fs.open_input_stream(self.key) as f:
            return f.read(limit)

    def write(self, data: bytes) -> None:
        with self.fs.open_output_stream(self.key) as f:
            f.write(data)

    def delete(self) -> None:
        t = self._info().type
        if t == self.pafs.FileType.Directory:
            self.fs.delete_dir(self.key)
        elif t == self.pafs.FileType.File:
            self.fs.delete_file(self.key)

    def rename(self, dst: str) -> bool:
        # an object store has no rename: copy, then delete (pyarrow's S3 move takes single objects only)
        target = dst.partition("://")[2].rstrip("/")
        if self.is_dir():
            self.pafs.copy_files(self.key, target, source_filesystem=self.fs, destination_filesystem=self.fs)
            self.fs.delete_dir(self.key)
        else:
            self.fs.move(self.key, target)
        return True

    def mkdirs(self) -> None:
        self.fs.create_dir(self.key, recursive=True)

    def upload(self, local: str) -> None:
        self.delete()
        self.pafs.copy_files(
            os.path.abspath(local),
            self.key,
            source_filesystem=self.pafs.LocalFileSystem(),
            destination_filesystem=self.fs,
        )

    def nearest_existing_ancestor_is_file(self) -> str | None:
        key = self.key
        while "/" in key:
            key = key.rsplit("/", 1)[0]
            t = self._info(key).type
            if t == self.pafs.FileType.File:
                return self._uri(key)
            if t == self.pafs.FileType.Directory:
                return None
        return None


_S3 = None


def _arrow_s3():
    """One ``pyarrow.fs.S3FileSystem`` per process (``AWS_ENDPOINT_URL``, if set, as its endpoint)."""
    global _S3
    if _S3 is None:
        from pyarrow import fs as pafs

        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        kw = {}
        if endpoint:
            u = urlparse(endpoint)
            kw = {"endpoint_override": u.netloc or u.path, "scheme": u.scheme or "https"}
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            kw["region"] = region
        _S3 = pafs.S3FileSystem(**kw)
    return _S3


def _store(spark, uri: str):
    """Return the non-local filesystem of ``uri``.

    That is Hadoop's through the driver JVM, or, over Spark Connect (no JVM in this process), :class:`_ArrowStore`.
    """
    from ..spark import is_connect

    if spark is not None and is_connect(spark):
        return _ArrowStore(uri)
    return _HadoopStore(spark, uri)


def list_files(spark, root: str) -> list[FileInfo]:
    """Every file below ``root`` (recursively).

    Raises :class:`InputError` when ``root`` does not exist or is not a directory.
    """
    if is_local(root):
        base = os.path.abspath(local_path(root))
        if not os.path.exists(base):
            raise InputError(
                f"log dir {root!r} does not exist: give the path of a broker's log.dirs directory (or a folder of them)"
            )
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
    st = _store(spark, root)
    if not st.exists():
        raise InputError(f"log dir {root!r} does not exist on its filesystem")
    if not st.is_dir():
        raise InputError(f"log dir {root!r} is a file, not a directory")
    return st.walk()


def read_small(spark, uri: str, limit: int = 1 << 20) -> bytes:
    """Bytes of a small file (at most ``limit`` bytes are read)."""
    if is_local(uri):
        with open(local_path(uri), "rb") as fh:
            return fh.read(limit)
    return _store(spark, uri).read(limit)


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
    _store(spark, uri).write(data)


def exists(spark, uri: str) -> bool:
    if is_local(uri):
        return os.path.exists(local_path(uri))
    return _store(spark, uri).exists()


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
    _store(spark, uri).delete()


def rename(spark, src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` (atomic on local filesystems and HDFS)."""
    if is_local(src):
        os.replace(local_path(src), local_path(dst))
        return
    if not _store(spark, src).rename(dst):
        raise OSError(f"could not rename {src} to {dst}")


def exchange(a: str, b: str) -> bool:
    """Swap two local paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``).

    Returns False where that is not available (another OS, an old kernel or C library, a filesystem without it),
    nothing changed then.
    """
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux") or not (is_local(a) and is_local(b)):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(local_path(a)), at_fdcwd, os.fsencode(local_path(b)), rename_exchange) == 0


def read_json(spark, uri: str, limit: int = 64 << 20):
    """Read the parsed JSON of a small file on any filesystem; None when it does not exist."""
    if not exists(spark, uri):
        return None
    return json.loads(read_small(spark, uri, limit).decode("utf-8"))


def upload(spark, local: str, uri: str) -> None:
    """Copy a local file or directory (recursively) to ``uri`` on its filesystem, replacing it."""
    _store(spark, uri).upload(local)


def children(spark, uri: str) -> list[str] | None:
    """Return the names directly inside a directory; None when ``uri`` does not exist.

    Raises
    ------
    NotADirectoryError
        ``uri`` is a file.
    """
    if is_local(uri):
        path = local_path(uri)
        if not os.path.exists(path):
            return None
        return os.listdir(path)  # NotADirectoryError for a file
    st = _store(spark, uri)
    if not st.exists():
        return None
    if not st.is_dir():
        raise NotADirectoryError(uri)
    return st.names()


def mkdirs(spark, uri: str) -> None:
    """Create a directory and its parents (no error when it exists)."""
    if is_local(uri):
        os.makedirs(local_path(uri), exist_ok=True)
        return
    _store(spark, uri).mkdirs()


#: the footer key under which Spark's Parquet writer stores the Spark schema of the rows
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def read_parquet(spark, path: str):
    """Read a Parquet table directory written by Spark, with the schema stored in its files.

    Spark infers a Parquet schema with a job of its own; for a local directory the schema is instead read from
    one file's footer (the Spark schema Spark's writer stores there, pyarrow: no job), so reading back a table
    this run wrote costs nothing until it is queried.  Other paths, and files without that footer key, are read
    with Spark's inference.

    Parameters
    ----------
    spark : SparkSession
    path : str
        The table directory: a local path or any URI Spark reads.

    Returns
    -------
    DataFrame
        Every column nullable, as Spark's own inference gives it.
    """
    schema = _footer_schema(path) if is_local(path) else None
    reader = spark.read if schema is None else spark.read.schema(schema)
    return reader.parquet(path)


def _footer_schema(path: str):
    """Return the Spark schema (nullable) in the footer of the first data file of local table ``path``.

    Returns
    -------
    StructType or None
        None when there is none (no file, not written by Spark, unreadable).
    """
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    try:
        files = parquet_files(path)
        meta = pq.read_schema(files[0]).metadata if files else None
    except (OSError, ValueError):
        return None
    if not meta or SPARK_SCHEMA_KEY not in meta:
        return None
    return StructType.fromJson(_nullable(json.loads(meta[SPARK_SCHEMA_KEY])))


def _nullable(node):
    """Make a Spark JSON schema's every field, array element and map value nullable (Scala's ``asNullable``)."""
    if isinstance(node, dict):
        out = {k: _nullable(v) for k, v in node.items()}
        for key in ("nullable", "containsNull", "valueContainsNull"):
            if key in out:
                out[key] = True
        return out
    if isinstance(node, list):
        return [_nullable(v) for v in node]
    return node


def parquet_files(path: str) -> list[str]:
    """List the data files of local Parquet table directory ``path``, sorted (not Spark's ``_SUCCESS`` or hidden files).

    Raises
    ------
    OSError
        ``path`` cannot be listed.
    """
    root = local_path(path)
    return sorted(
        os.path.join(root, n) for n in os.listdir(root) if n.endswith(".parquet") and not n.startswith((".", "_"))
    )
