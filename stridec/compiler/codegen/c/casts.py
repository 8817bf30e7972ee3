"""Converting between stridec's element types bit for bit as torch's CPU `.to()`, in C.

The conversions are C in the package: the element helpers in `lib/casts.h`, with which
the planned library's casts (`lib/copy_cast.h`) convert, and with vector instructions
where those give the same bits. This module hands the helpers to the units that paste
them: `C_PRELUDE`, the `#include`s and `static inline` helpers of `lib/casts.h`.

The oracle is torch's `.to()` on a contiguous CPU tensor, the loop that covers the bulk of
every large tensor. torch does not give one answer everywhere: for a few NaN and
out-of-range inputs the elements of its scalar path (a short tensor's tail, a strided
source) differ from those of its vector loop, and the vector loop is what is matched here:

* float32 or float64 NaN → bfloat16 is `0xffff` (the scalar path gives `0x7fc0`); a
  float16 NaN → bfloat16 is `0x7fc0` (torch's only path for that pair);
* float16 NaN → float32 keeps its payload, shifted up by 13 bits, with the quiet bit set
  (x86 `vcvtph2ps`; torch's scalar tail gives `0x7fffffff`);
* float → uint32 for NaN and values outside `(-2^31, 2^32)`: the vector loop's
  "subtract 2^31 when x ≥ 2^31" conversion (NaN gives `0x80000000`); the scalar path goes
  through int64 instead, and so does every float16 → uint32 (torch has no vector loop
  for it).

Everything else is one rule throughout torch:

* to float16 and bfloat16, every source goes through float32 first (two roundings for
  float64 and the wide integers, as torch's `c10::Half(float)`), then rounds to nearest
  even; a float32 NaN → float16 keeps its sign and top 10 payload bits with the quiet bit
  set (x86 `vcvtps2ph`), so `0x7f800001` → `0x7e00`;
* float16 and bfloat16 widen exactly (bfloat16 is the top half of a float32); float32 ↔
  float64 are the C casts (x86 quiets a signalling NaN and keeps the payload's top bits);
* float → int32 / int64 truncates toward zero; NaN and values out of range give the
  smallest integer (`INT32_MIN`, `INT64_MIN`), as x86's `cvttss2si`. C leaves an
  out-of-range conversion undefined, so the helpers test the range first and convert only
  in-range values. int8 and int16 take the low bits of that int32, uint8 the low bits of
  the int64 (torch casts to uint8 through int64: `c10::static_cast_with_inter_type`);
* to bool: `x != 0` (NaN is true, -0.0 false);
* from bool: any byte other than 0 is 1 (a bool tensor made by viewing uint8 bytes, by
  `frombuffer` or from numpy may hold 2 … 255; torch reads each as true);
* between integers, C's conversions: they wrap modulo 2^bits (gcc defines the narrowing
  of signed values so); integer → float rounds to nearest even.

The helpers are branch-free selects over integer bit patterns (NaN is tested on the bits,
never with `x != x`), so gcc vectorizes loops of them. They need IEEE arithmetic: compile
without `-ffast-math` (or `-ffinite-math-only`), and with flush-to-zero off (the default).
"""

from __future__ import annotations

from stridec.compiler.codegen.c.library import library_text

__all__ = ["C_PRELUDE"]

# The helpers, C in the package (lib/casts.h).
C_PRELUDE = library_text("casts.h")
