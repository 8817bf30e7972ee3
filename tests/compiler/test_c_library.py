"""The package's C library as Python reads it (`stridec.compiler.codegen.c.library`): units
with their includes pasted in, argument blocks laid out by the headers' field lists."""

from __future__ import annotations

import re

import pytest

from stridec.compiler.codegen.c import philox, pool
from stridec.compiler.codegen.c.library import library_text, macro_fields, unit_text
from stridec.compiler.codegen.c.plan import plan_unit_source
from stridec.compiler.codegen.philox_plan import PhiloxSpec
from stridec.ir.dtypes import as_dtype


def test_a_unit_is_its_file_with_the_library_files_it_includes_pasted_in():
    text = unit_text("philox.c")
    # Self-contained: the build reads nothing else, so the cache's key (the text) covers it.
    assert '#include "' not in text and "#include <stdlib.h>" in text
    # A header with a guard and one without (pasted once per output type) alike.
    assert text.count(library_text("philox_abi.h").strip("\n")) == 1
    assert text.count(library_text("philox_variant.h").strip("\n")) == 4
    assert unit_text("philox.c") in philox.PHILOX_C_SOURCE


def test_the_philox_blocks_are_filled_by_the_headers_field_names():
    abi = library_text("philox_abi.h")
    assert philox.HEADER == macro_fields(abi, "STRIDEC_PHILOX_HEADER")
    assert philox.ADVANCE == macro_fields(abi, "STRIDEC_PHILOX_ADVANCE")
    # bits[1:3, 2:5] of a (4, 6) output, written contiguously at 3: index of (1, 2) is 8.
    spec = PhiloxSpec((2, 3), (6, 1), 8, (3, 1), 3, 24, as_dtype("uint32"))
    params = philox.philox_params(spec, state_words=(10, 11, 12, 13, 14, 15))
    field = dict(zip(philox.HEADER, params, strict=False))
    assert (field["rank"], field["numel"], field["index_offset"], field["dst_offset"]) == (
        2, 24, 8, 3)
    assert [field[f"state{k}"] for k in range(6)] == [10, 11, 12, 13, 14, 15]
    assert params[philox.HEADER_WORDS:] == (2, 3, 6, 1, 3, 1)  # sizes, index, dst strides
    advance = dict(zip(philox.ADVANCE, philox.advance_params(24, range(6), range(6, 12)),
                       strict=True))
    assert advance["blocks"] == 6 and advance["new_state0"] == 6 and advance["state5"] == 5


def test_the_pools_names_are_read_from_its_c():
    source = pool.POOL_C_SOURCE
    assert '#include "' not in source
    for name in (pool.POOL_SYMBOL, pool.POOL_BATCH_SYMBOL, pool.POOL_OPENMP_SYMBOL):
        assert re.search(rf"^void {name}\(", source, re.M), name  # defined by the library
    assert re.search(rf"^int64_t {pool.STREAM_SYMBOL} = -1;$", source, re.M)
    # Each kernel unit holds the declarations once, so it names the same versions.
    for unit in (philox.PHILOX_C_SOURCE, plan_unit_source(2)):
        assert unit.count(pool.POOL_DECLARATION.strip("\n")) == 1
    assert plan_unit_source(2).count(pool.STREAM_DECLARATION.strip("\n")) == 1
    with pytest.raises(ValueError, match="stridec_pool_run_v<N>"):
        pool._versioned("stridec_pool_run_v1(); stridec_pool_run_v2();", "stridec_pool_run")
