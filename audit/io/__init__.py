"""Shared I/O: the filesystems an audit reads and writes (local, Hadoop, object stores: :mod:`.fs`, whose
:class:`~.fs.InputError` is the project's usage error) and the output's commit protocol (:mod:`.outputs`)."""
