"""The text-file harnesses: ``leader_epoch_checkpoint``, ``offset_checkpoint`` and ``meta_properties``,
with the line- and token-aware :func:`text_mutator`.
"""

from __future__ import annotations


from audit.formats.checkpoints import (
    CheckpointError,
    broker_id_of,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
)

from bench.fuzz_harnesses.common import check, make_harness, small_files
from bench.fuzz_harnesses.mutators import ByteMutate, seeded_rng, simple_byte_mutate
from bench.fuzz_harnesses.seeds import data_files, dedup, seed_name


def leader_epoch_checkpoint(data: bytes) -> None:
    """A ``leader-epoch-checkpoint`` file: ``parse_leader_epoch_checkpoint`` (documented exception:
    ``CheckpointError``) and ``read_small_files`` on the file (documented exceptions: none)."""
    text = data.decode("utf-8", "replace")
    try:
        entries = parse_leader_epoch_checkpoint(text)
    except CheckpointError:
        entries = None
    if entries is not None:
        for e, s in entries:
            check(-(1 << 31) <= e < 1 << 31 and -(1 << 63) <= s < 1 << 63, "entry outside its Java type")
    small_files("/fuzz/broker-1/__consumer_offsets-0/leader-epoch-checkpoint", data)


def offset_checkpoint(data: bytes) -> None:
    """A root offset checkpoint (``replication-offset-checkpoint``, ``log-start-offset-checkpoint``,
    ...): ``parse_offset_checkpoint`` (documented exception: ``CheckpointError``) and
    ``read_small_files`` on the file (documented exceptions: none)."""
    text = data.decode("utf-8", "replace")
    try:
        entries = parse_offset_checkpoint(text)
    except CheckpointError:
        entries = None
    if entries is not None:
        for (_t, p), o in entries.items():
            check(-(1 << 31) <= p < 1 << 31 and -(1 << 63) <= o < 1 << 63, "entry outside its Java type")
    small_files("/fuzz/broker-1/replication-offset-checkpoint", data)


def meta_properties(data: bytes) -> None:
    """``meta.properties`` as discovery reads it (bytes decoded as UTF-8 with replacement):
    ``parse_meta_properties`` and ``broker_id_of``, whose broker id the audit stores in ``int``
    columns, so it must be None or fit an int32.  Documented exceptions: none."""
    props = parse_meta_properties(data.decode("utf-8", "replace"))
    bid = broker_id_of(props)
    check(bid is None or -(1 << 31) <= bid < 1 << 31, f"broker id {bid} does not fit the int broker_id column")


_TOKENS = (
    "0",
    "1",
    "-1",
    "+1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "1_0",
    "\u0663",
    "\uff11",
    "1e3",
    "0x10",
    "",
    " ",
    "\t",
    "\x00",
    "nan",
    "9" * 5000,
    "-" + "9" * 30,
    "__consumer_offsets",
    "a b",
    "\u2028",
    "=",
    "node.id",
    "broker.id",
)
_SEPS = (" ", "\t", "  ", "\x0b", "\x0c", "\r", "\u00a0", "\u3000")
_NEWLINES = ("\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028")


def text_mutator(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
    """Line- and token-aware edit of a checkpoint or properties file: a number at an extreme or in
    another script, a wrong entry count, other whitespace and line breaks, many lines."""
    rng = seeded_rng(seed)
    if rng.random() < 0.15:
        return byte_mutate(data, max_size)
    lines = data.decode("utf-8", "replace").split("\n")
    i = rng.randrange(len(lines))
    op = rng.randrange(8)
    if op <= 2:
        toks = lines[i].split(" ") if " " in lines[i] else lines[i].split("=")
        sep = " " if " " in lines[i] else "="
        j = rng.randrange(len(toks))
        toks[j] = rng.choice(_TOKENS)
        lines[i] = sep.join(toks)
    elif op == 3:
        lines[i] = lines[i].replace(" ", rng.choice(_SEPS), 1)
    elif op == 4:
        sep = rng.choice(_NEWLINES)
        return (sep.join(lines).encode("utf-8", "surrogatepass"))[:max_size]
    elif op == 5:  # many entries (bounded by max_size)
        k = min(rng.choice((2, 10, 1000, 50000)), max(max_size // (len(lines[i]) + 1), 1))
        lines[i : i + 1] = [lines[i]] * k
    elif op == 6 and len(lines) > 1:
        lines[1] = rng.choice(_TOKENS)
    else:
        del lines[i]
    return "\n".join(lines).encode("utf-8", "surrogatepass")[:max_size]


def _text_files(names: tuple[str, ...]) -> list[tuple[str, bytes]]:
    out = []
    for name in names:
        out.extend((seed_name(p), p.read_bytes()) for p in data_files(f"**/{name}"))
    return dedup(out)


LEADER_EPOCH_CHECKPOINT = make_harness(
    "leader_epoch_checkpoint",
    leader_epoch_checkpoint,
    lambda: _text_files(("leader-epoch-checkpoint",)),
    text_mutator,
)
OFFSET_CHECKPOINT = make_harness(
    "offset_checkpoint",
    offset_checkpoint,
    lambda: _text_files(
        (
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
            "recovery-point-offset-checkpoint",
            "cleaner-offset-checkpoint",
        )
    ),
    text_mutator,
)
META_PROPERTIES = make_harness(
    "meta_properties", meta_properties, lambda: _text_files(("meta.properties",)), text_mutator
)
