//go:build !purego

#include "textflag.h"

// AVX2 base64 (standard alphabet) after Wojciech Muła and Daniel Lemire,
// "Faster Base64 Encoding and Decoding Using AVX2 Instructions" (2018).
// Only whole blocks are done here: base64.go does the tail, the padding and
// every error. Neither function reads or writes outside its slices.

// func encodeAVX2(dst, src []byte) int
//
// Encodes 24 bytes of src into 32 characters of dst per step while src has
// at least 28 readable bytes and dst room for 32, and returns the number of
// bytes of src consumed (a multiple of 24).
TEXT ·encodeAVX2(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	XORQ AX, AX

	VMOVDQU enc_shuf<>(SB), Y15
	VMOVDQU enc_mask_hi<>(SB), Y14
	VMOVDQU enc_mul_hi<>(SB), Y13
	VMOVDQU enc_mask_lo<>(SB), Y12
	VMOVDQU enc_mul_lo<>(SB), Y11
	VMOVDQU enc_51<>(SB), Y10
	VMOVDQU enc_26<>(SB), Y9
	VMOVDQU enc_13<>(SB), Y8
	VMOVDQU enc_shift<>(SB), Y7

encloop:
	CMPQ CX, $28
	JB   encdone
	CMPQ DX, $32
	JB   encdone

	// Lane 0 gets src[0:12], lane 1 src[12:24], each at lane offset 0:
	// bytes 0..27 are read.
	VMOVDQU     (SI), X0
	VINSERTI128 $1, 12(SI), Y0, Y0

	// Per 3 bytes b0 b1 b2: the bytes b1 b0 b2 b1, then the four 6-bit
	// indices, one a byte.
	VPSHUFB  Y15, Y0, Y0
	VPAND    Y14, Y0, Y1
	VPMULHUW Y13, Y1, Y1
	VPAND    Y12, Y0, Y2
	VPMULLW  Y11, Y2, Y2
	VPOR     Y1, Y2, Y0

	// Index to character: an offset chosen by range, added.
	VPSUBUSB Y10, Y0, Y1 // saturate(i - 51): 1..12 for 52..63, else 0
	VPCMPGTB Y0, Y9, Y2  // 26 > i
	VPAND    Y8, Y2, Y2  // 13 where i < 26
	VPOR     Y2, Y1, Y1
	VPSHUFB  Y1, Y7, Y1
	VPADDB   Y1, Y0, Y0

	VMOVDQU Y0, (DI)

	ADDQ $24, SI
	SUBQ $24, CX
	ADDQ $32, DI
	SUBQ $32, DX
	ADDQ $24, AX
	JMP  encloop

encdone:
	VZEROUPPER
	MOVQ AX, ret+48(FP)
	RET

// func decodeAVX2(dst, src []byte) int
//
// Decodes 32 characters of src into 24 bytes of dst per step while src has
// at least 32 characters left and dst room for 32 bytes (a step stores 32,
// of which 24 count), stopping before the first block holding a byte that
// is not in the alphabet ('=' included). It returns the number of
// characters consumed (a multiple of 32); the bytes written are that /4*3.
TEXT ·decodeAVX2(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	XORQ AX, AX

	VMOVDQU dec_lut_lo<>(SB), Y15
	VMOVDQU dec_lut_hi<>(SB), Y14
	VMOVDQU dec_lut_roll<>(SB), Y13
	VMOVDQU dec_2f<>(SB), Y12
	VMOVDQU dec_mul_ab<>(SB), Y11
	VMOVDQU dec_mul_abc<>(SB), Y10
	VMOVDQU dec_pack<>(SB), Y9
	VMOVDQU dec_perm<>(SB), Y8

decloop:
	CMPQ CX, $32
	JB   decdone
	CMPQ DX, $32
	JB   decdone

	VMOVDQU (SI), Y0

	// Classify by nibbles: a byte is in the alphabet exactly when
	// lut_lo[low nibble] & lut_hi[high nibble] is zero. (Masking with 0x2f
	// leaves bit 7 clear, so VPSHUFB sees just the low nibble.)
	VPSRLD   $4, Y0, Y1
	VPAND    Y12, Y1, Y1 // high nibbles
	VPAND    Y12, Y0, Y2 // low nibbles
	VPSHUFB  Y2, Y15, Y2
	VPCMPEQB Y12, Y0, Y3 // '/'
	VPADDB   Y1, Y3, Y3  // roll index: the high nibble, less one for '/'
	VPSHUFB  Y1, Y14, Y1
	VPTEST   Y1, Y2
	JNZ      decdone

	// Character to 6-bit value, then four values to three bytes.
	VPSHUFB    Y3, Y13, Y3
	VPADDB     Y3, Y0, Y0
	VPMADDUBSW Y11, Y0, Y0
	VPMADDWD   Y10, Y0, Y0
	VPSHUFB    Y9, Y0, Y0
	VPERMD     Y0, Y8, Y0

	VMOVDQU Y0, (DI)

	ADDQ $32, SI
	SUBQ $32, CX
	ADDQ $24, DI
	SUBQ $24, DX
	ADDQ $32, AX
	JMP  decloop

decdone:
	VZEROUPPER
	MOVQ AX, ret+48(FP)
	RET

// func cpuHasAVX2() bool
//
// Whether the CPU has AVX2 and the OS saves the YMM registers.
TEXT ·cpuHasAVX2(SB), NOSPLIT, $0-1
	XORL AX, AX
	XORL CX, CX
	CPUID
	CMPL AX, $7
	JB   no

	MOVL $1, AX
	XORL CX, CX
	CPUID
	ANDL $0x18000000, CX // OSXSAVE (bit 27) and AVX (bit 28)
	CMPL CX, $0x18000000
	JNE  no

	XORL   CX, CX
	XGETBV
	ANDL   $6, AX        // XMM and YMM state enabled by the OS
	CMPL   AX, $6
	JNE    no

	MOVL $7, AX
	XORL CX, CX
	CPUID
	BTL  $5, BX          // AVX2
	JCC  no

	MOVB $1, ret+0(FP)
	RET

no:
	MOVB $0, ret+0(FP)
	RET

// Encoding constants, the same in both 128-bit lanes.

DATA enc_shuf<>+0x00(SB)/8, $0x0405030401020001
DATA enc_shuf<>+0x08(SB)/8, $0x0a0b090a07080607
DATA enc_shuf<>+0x10(SB)/8, $0x0405030401020001
DATA enc_shuf<>+0x18(SB)/8, $0x0a0b090a07080607
GLOBL enc_shuf<>(SB), RODATA|NOPTR, $32

DATA enc_mask_hi<>+0x00(SB)/8, $0x0fc0fc000fc0fc00
DATA enc_mask_hi<>+0x08(SB)/8, $0x0fc0fc000fc0fc00
DATA enc_mask_hi<>+0x10(SB)/8, $0x0fc0fc000fc0fc00
DATA enc_mask_hi<>+0x18(SB)/8, $0x0fc0fc000fc0fc00
GLOBL enc_mask_hi<>(SB), RODATA|NOPTR, $32

DATA enc_mul_hi<>+0x00(SB)/8, $0x0400004004000040
DATA enc_mul_hi<>+0x08(SB)/8, $0x0400004004000040
DATA enc_mul_hi<>+0x10(SB)/8, $0x0400004004000040
DATA enc_mul_hi<>+0x18(SB)/8, $0x0400004004000040
GLOBL enc_mul_hi<>(SB), RODATA|NOPTR, $32

DATA enc_mask_lo<>+0x00(SB)/8, $0x003f03f0003f03f0
DATA enc_mask_lo<>+0x08(SB)/8, $0x003f03f0003f03f0
DATA enc_mask_lo<>+0x10(SB)/8, $0x003f03f0003f03f0
DATA enc_mask_lo<>+0x18(SB)/8, $0x003f03f0003f03f0
GLOBL enc_mask_lo<>(SB), RODATA|NOPTR, $32

DATA enc_mul_lo<>+0x00(SB)/8, $0x0100001001000010
DATA enc_mul_lo<>+0x08(SB)/8, $0x0100001001000010
DATA enc_mul_lo<>+0x10(SB)/8, $0x0100001001000010
DATA enc_mul_lo<>+0x18(SB)/8, $0x0100001001000010
GLOBL enc_mul_lo<>(SB), RODATA|NOPTR, $32

DATA enc_51<>+0x00(SB)/8, $0x3333333333333333
DATA enc_51<>+0x08(SB)/8, $0x3333333333333333
DATA enc_51<>+0x10(SB)/8, $0x3333333333333333
DATA enc_51<>+0x18(SB)/8, $0x3333333333333333
GLOBL enc_51<>(SB), RODATA|NOPTR, $32

DATA enc_26<>+0x00(SB)/8, $0x1a1a1a1a1a1a1a1a
DATA enc_26<>+0x08(SB)/8, $0x1a1a1a1a1a1a1a1a
DATA enc_26<>+0x10(SB)/8, $0x1a1a1a1a1a1a1a1a
DATA enc_26<>+0x18(SB)/8, $0x1a1a1a1a1a1a1a1a
GLOBL enc_26<>(SB), RODATA|NOPTR, $32

DATA enc_13<>+0x00(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA enc_13<>+0x08(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA enc_13<>+0x10(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA enc_13<>+0x18(SB)/8, $0x0d0d0d0d0d0d0d0d
GLOBL enc_13<>(SB), RODATA|NOPTR, $32

// enc_shift[k] is added to index i in class k: 0 for 26..51 ('a'-26),
// 1..10 for 52..61 ('0'-52), 11 for 62 ('+'-62), 12 for 63 ('/'-63),
// 13 for 0..25 ('A').
DATA enc_shift<>+0x00(SB)/8, $0xfcfcfcfcfcfcfc47
DATA enc_shift<>+0x08(SB)/8, $0x000041f0edfcfcfc
DATA enc_shift<>+0x10(SB)/8, $0xfcfcfcfcfcfcfc47
DATA enc_shift<>+0x18(SB)/8, $0x000041f0edfcfcfc
GLOBL enc_shift<>(SB), RODATA|NOPTR, $32

// Decoding constants, the same in both 128-bit lanes except dec_perm.

DATA dec_lut_lo<>+0x00(SB)/8, $0x1111111111111115
DATA dec_lut_lo<>+0x08(SB)/8, $0x1a1b1b1b1a131111
DATA dec_lut_lo<>+0x10(SB)/8, $0x1111111111111115
DATA dec_lut_lo<>+0x18(SB)/8, $0x1a1b1b1b1a131111
GLOBL dec_lut_lo<>(SB), RODATA|NOPTR, $32

DATA dec_lut_hi<>+0x00(SB)/8, $0x0804080402011010
DATA dec_lut_hi<>+0x08(SB)/8, $0x1010101010101010
DATA dec_lut_hi<>+0x10(SB)/8, $0x0804080402011010
DATA dec_lut_hi<>+0x18(SB)/8, $0x1010101010101010
GLOBL dec_lut_hi<>(SB), RODATA|NOPTR, $32

// dec_lut_roll[h] is added to a valid character with high nibble h ('/',
// whose h is 2, uses 1): 16 for '/', 19 for '+', 4 for '0'..'9', -65 for
// 'A'..'Z' and -71 for 'a'..'z'.
DATA dec_lut_roll<>+0x00(SB)/8, $0xb9b9bfbf04131000
DATA dec_lut_roll<>+0x08(SB)/8, $0x0000000000000000
DATA dec_lut_roll<>+0x10(SB)/8, $0xb9b9bfbf04131000
DATA dec_lut_roll<>+0x18(SB)/8, $0x0000000000000000
GLOBL dec_lut_roll<>(SB), RODATA|NOPTR, $32

DATA dec_2f<>+0x00(SB)/8, $0x2f2f2f2f2f2f2f2f
DATA dec_2f<>+0x08(SB)/8, $0x2f2f2f2f2f2f2f2f
DATA dec_2f<>+0x10(SB)/8, $0x2f2f2f2f2f2f2f2f
DATA dec_2f<>+0x18(SB)/8, $0x2f2f2f2f2f2f2f2f
GLOBL dec_2f<>(SB), RODATA|NOPTR, $32

DATA dec_mul_ab<>+0x00(SB)/8, $0x0140014001400140
DATA dec_mul_ab<>+0x08(SB)/8, $0x0140014001400140
DATA dec_mul_ab<>+0x10(SB)/8, $0x0140014001400140
DATA dec_mul_ab<>+0x18(SB)/8, $0x0140014001400140
GLOBL dec_mul_ab<>(SB), RODATA|NOPTR, $32

DATA dec_mul_abc<>+0x00(SB)/8, $0x0001100000011000
DATA dec_mul_abc<>+0x08(SB)/8, $0x0001100000011000
DATA dec_mul_abc<>+0x10(SB)/8, $0x0001100000011000
DATA dec_mul_abc<>+0x18(SB)/8, $0x0001100000011000
GLOBL dec_mul_abc<>(SB), RODATA|NOPTR, $32

// Per lane: the three bytes of each 32-bit word, big-endian, packed into
// the low 12 bytes.
DATA dec_pack<>+0x00(SB)/8, $0x090a040506000102
DATA dec_pack<>+0x08(SB)/8, $0xffffffff0c0d0e08
DATA dec_pack<>+0x10(SB)/8, $0x090a040506000102
DATA dec_pack<>+0x18(SB)/8, $0xffffffff0c0d0e08
GLOBL dec_pack<>(SB), RODATA|NOPTR, $32

// The two lanes' 12 bytes made contiguous.
DATA dec_perm<>+0x00(SB)/8, $0x0000000100000000
DATA dec_perm<>+0x08(SB)/8, $0x0000000400000002
DATA dec_perm<>+0x10(SB)/8, $0x0000000600000005
DATA dec_perm<>+0x18(SB)/8, $0x0000000700000007
GLOBL dec_perm<>(SB), RODATA|NOPTR, $32
