/* A unit built in parts (stridec/compiler/codegen/c/parts.py): `#if IN_PART(k)` around
   what part k alone defines; PART_FN on a function defined in one part and called from
   another (a hidden symbol of the library in parts, static built whole; never inlined). */
#ifdef STRIDEC_PART
#define IN_PART(k) (STRIDEC_PART == (k))
#define PART_FN __attribute__((visibility("hidden"), noinline))
#else
#define IN_PART(k) 1
#define PART_FN static __attribute__((noinline))
#endif
