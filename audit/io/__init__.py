"""Shared I/O: the filesystems an audit reads and writes, and the output's commit protocol.

The filesystems are local, Hadoop and object stores (:mod:`.fs`, whose :class:`~.fs.InputError` is the project's
usage error); the commit protocol is :mod:`.outputs`.
"""
