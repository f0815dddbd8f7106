"""ioassess/inputs/traceformat.py must mirror plugin/ioassess-trace.h exactly: this compiles a C
program against the header that prints the layout of every struct field and the value of every
constant, and compares them with the numpy dtypes and Python constants."""
import math
import pathlib
import re
import subprocess

import pytest

from ioassess.inputs import traceformat as tf

HEADER = pathlib.Path(__file__).resolve().parents[1] / "plugin" / "ioassess-trace.h"

# Python enum class -> prefix of its members' C names.
ENUM_PREFIXES = {
    tf.SlotType: "IOASSESS_SLOT_",
    tf.Op: "IOASSESS_OP_",
    tf.ClockSource: "IOASSESS_CLOCK_",
    tf.EndReason: "IOASSESS_END_",
    tf.HeaderFlag: "IOASSESS_HEADER_",
    tf.OpFlag: "IOASSESS_OP_",
    tf.SummaryState: "IOASSESS_SUMMARY_",
    tf.BufferState: "IOASSESS_BUFFER_",
    tf.Layer: "IOASSESS_LAYER_",
}
SCALAR_CONSTANTS = {
    "IOASSESS_FORMAT_VERSION": tf.FORMAT_VERSION,
    "IOASSESS_HEADER_BYTES": tf.HEADER_BYTES,
    "IOASSESS_SLOT_BYTES": tf.SLOT_BYTES,
    "IOASSESS_BYTE_ORDER_MARK": tf.BYTE_ORDER_MARK,
    "IOASSESS_NAME_PART_BYTES": tf.NAME_PART_BYTES,
    "IOASSESS_HIST_BINS": tf.HIST_BINS,
    "IOASSESS_OP_LAYER_SHIFT": tf.OP_LAYER_SHIFT,
}
INCLUDE_GUARD = "IOASSESS_TRACE_H"

C_TYPE_CODES = """
#define TYPE_CODE(x) _Generic((x), char: "c", signed char: "i1", unsigned char: "u1", \\
    short: "i2", unsigned short: "u2", int: "i4", unsigned int: "u4", \\
    long: "i8", unsigned long: "u8", long long: "i8", unsigned long long: "u8")
"""


def enum_constants():
    """C name -> value of every enum member and flag mirrored in Python."""
    return {prefix + member.name: int(member)
            for cls, prefix in ENUM_PREFIXES.items() for member in cls}


def numpy_field_layout(dtype, name):
    """(offset, size, element type code) of a field, in the C program's terms."""
    field_dtype, offset = dtype.fields[name][:2]
    if field_dtype.kind == "S":
        return offset, field_dtype.itemsize, "c"
    base = field_dtype.base
    size = base.itemsize * math.prod(field_dtype.shape)
    return offset, size, f"{base.kind}{base.itemsize}"


def is_array_field(dtype, name):
    field_dtype = dtype.fields[name][0]
    return field_dtype.kind == "S" or bool(field_dtype.shape)


def c_program():
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "ioassess-trace.h"',
             C_TYPE_CODES, "int main(void) {"]
    for struct, dtype in tf.STRUCT_DTYPES.items():
        lines.append(f'printf("sizeof {struct} %zu\\n", sizeof(struct {struct}));')
        for name in dtype.names:
            element = f"((struct {struct} *)0)->{name}" + ("[0]" if is_array_field(dtype, name) else "")
            lines.append(f'printf("field {struct}.{name} %zu %zu %s\\n", offsetof(struct {struct}, {name}), '
                         f'sizeof(((struct {struct} *)0)->{name}), TYPE_CODE({element}));')
    for c_name in [*SCALAR_CONSTANTS, *enum_constants()]:
        lines.append(f'printf("const {c_name} %llu\\n", (unsigned long long)({c_name}));')
    lines.append('printf("magic %s\\n", IOASSESS_MAGIC);')
    lines.append("return 0; }")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def c_output(tmp_path_factory):
    """Lines printed by the compiled layout program, split into words."""
    work = tmp_path_factory.mktemp("layout")
    (work / "layout.c").write_text(c_program())
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", f"-I{HEADER.parent}", "-o", str(work / "layout"),
                    str(work / "layout.c")], check=True)
    out = subprocess.run([str(work / "layout")], check=True, capture_output=True, text=True).stdout
    return [line.split(" ") for line in out.splitlines()]


def test_every_dtype_covers_its_struct_without_gaps():
    for struct, dtype in tf.STRUCT_DTYPES.items():
        end = 0
        for name in dtype.names:
            offset, size, _ = numpy_field_layout(dtype, name)
            assert offset == end, f"{struct}.{name} leaves a gap"
            end = offset + size
        assert end == dtype.itemsize, struct


def test_struct_sizes_match(c_output):
    sizes = {words[1]: int(words[2]) for words in c_output if words[0] == "sizeof"}
    assert sizes == {struct: dtype.itemsize for struct, dtype in tf.STRUCT_DTYPES.items()}


def test_every_field_has_the_c_offset_size_and_type(c_output):
    c_fields = {words[1]: (int(words[2]), int(words[3]), words[4]) for words in c_output if words[0] == "field"}
    numpy_fields = {f"{struct}.{name}": numpy_field_layout(dtype, name)
                    for struct, dtype in tf.STRUCT_DTYPES.items() for name in dtype.names}
    assert c_fields == numpy_fields


def test_slots_are_slot_sized_and_the_header_fits():
    for struct, dtype in tf.STRUCT_DTYPES.items():
        if struct in ("ioassess_op_record", "ioassess_file_record", "ioassess_name_part", "ioassess_clock_record",
                      "ioassess_pagecache_record"):
            assert dtype.itemsize == tf.SLOT_BYTES, struct
    assert tf.HEADER_DTYPE.itemsize <= tf.HEADER_BYTES
    assert tf.SUMMARY_ENTRY_DTYPE.itemsize % tf.SLOT_BYTES == 0


def test_constants_match(c_output):
    c_constants = {words[1]: int(words[2]) for words in c_output if words[0] == "const"}
    assert c_constants == {**SCALAR_CONSTANTS, **enum_constants()}
    assert [words[1] for words in c_output if words[0] == "magic"] == [tf.MAGIC.decode()]


def test_python_mirrors_every_constant_the_header_defines():
    text = HEADER.read_text()
    defined = set(re.findall(r"^#define\s+(IOASSESS_\w+)", text, re.M))
    defined |= set(re.findall(r"^\s+(IOASSESS_\w+)\s*=", text, re.M))
    mirrored = {*SCALAR_CONSTANTS, *enum_constants(), "IOASSESS_MAGIC", INCLUDE_GUARD}
    assert defined == mirrored


def test_op_names_directions_and_layers_cover_every_kind():
    mpiio_first = tf.Layer.MPIIO << tf.OP_LAYER_SHIFT
    stdio_first = tf.Layer.STDIO << tf.OP_LAYER_SHIFT
    kinds = (set(range(1, tf.Op.COUNT)) | set(range(mpiio_first, tf.Op.MPIIO_COUNT))
             | set(range(stdio_first, tf.Op.STDIO_COUNT)))
    assert set(tf.OP_NAMES) == kinds == set(tf.OP_DIRECTION) == set(tf.OP_LAYER)
    assert set(tf.OP_DIRECTION.values()) == set(tf.DIRECTIONS)
    assert tf.OP_DIRECTION[tf.Op.PREADV2] == "read" and tf.OP_DIRECTION[tf.Op.PWRITEV] == "write"
    assert tf.OP_DIRECTION[tf.Op.FDATASYNC] == "sync"
    assert tf.Op.MPIIO_COUNT <= 2 * mpiio_first   # MPI-IO kinds stay in their layer's range
    assert {op for op, layer in tf.OP_LAYER.items() if layer == "mpiio"} == set(range(mpiio_first, tf.Op.MPIIO_COUNT))
    directions = {tf.OP_NAMES[op]: tf.OP_DIRECTION[op] for op in range(mpiio_first, tf.Op.MPIIO_COUNT)}
    assert {name for name, direction in directions.items() if direction == "read"} == {
        "mpi_file_read", "mpi_file_read_at", "mpi_file_read_all", "mpi_file_read_at_all", "mpi_file_read_shared",
        "mpi_file_read_ordered", "mpi_file_iread", "mpi_file_iread_at", "mpi_file_iread_all",
        "mpi_file_iread_at_all", "mpi_file_iread_shared", "mpi_file_read_all_begin", "mpi_file_read_at_all_begin",
        "mpi_file_read_ordered_begin"}
    assert [name for name, direction in directions.items() if direction == "sync"] == ["mpi_file_sync"]
    assert all(name.replace("read", "write") in directions for name, d in directions.items() if d == "read")
    assert tf.Op.STDIO_COUNT <= stdio_first + (1 << tf.OP_LAYER_SHIFT)   # stdio kinds stay in their range
    assert {op for op, layer in tf.OP_LAYER.items() if layer == "stdio"} == set(range(stdio_first, tf.Op.STDIO_COUNT))
    stdio = {tf.OP_NAMES[op]: tf.OP_DIRECTION[op] for op in range(stdio_first, tf.Op.STDIO_COUNT)}
    assert stdio == {"fopen": "meta", "fclose": "meta", "fread": "read", "fwrite": "write", "fgets": "read",
                     "fputs": "write", "fgetc": "read", "fputc": "write", "fprintf": "write", "fscanf": "read",
                     "fflush": "write", "fseek": "meta", "ftell": "meta"}
    assert {tf.OP_NAMES[op]: tf.META_KIND_NAMES[op] for op in range(stdio_first, tf.Op.STDIO_COUNT)
            if op in tf.META_KIND_NAMES} == {"fopen": "open", "fclose": "close", "fseek": "seek", "ftell": "seek"}
