/* CRC32C (Castagnoli, the iSCSI/ext4 polynomial 0x1EDC6F41, reflected 0x82F63B78): the checksum every
 * chunk the NVMe store swaps carries. SSE4.2's crc32 instruction where the CPU has it (chosen at run
 * time), else a slicing-by-8 table. zcrc32c(0, "123456789", 9) == 0xE3069283. */
#ifndef ZINC_RUNTIME_CORE_CRC32C_H
#define ZINC_RUNTIME_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC: pass 0 to start, the previous result to extend (zcrc32c(zcrc32c(0, a), b) is the
 * CRC of a followed by b). */
uint32_t zcrc32c(uint32_t crc, const void *buf, size_t n);
/* The CRC of a followed by b from crc1 = zcrc32c(0, a) and crc2 = zcrc32c(0, b) of len2 bytes, without
 * reading either again (zlib's crc32_combine method: O(log len2) small matrix products). */
uint32_t zcrc32c_combine(uint32_t crc1, uint32_t crc2, size_t len2);
/* The portable table version (for tests comparing the two). */
uint32_t zcrc32c_table(uint32_t crc, const void *buf, size_t n);
/* "sse4.2" or "table". */
const char *zcrc32c_impl(void);

#endif
