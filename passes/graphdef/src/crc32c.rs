//! CRC-32C (Castagnoli), the checksum of LevelDB-style tables and of every
//! tensor in a TensorFlow checkpoint, and the "masked" form tables store
//! (a rotation plus a constant, so a checksum of data holding checksums
//! does not degenerate).

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82f6_3b78;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Continues the checksum `crc` (of earlier bytes) over `bytes`.
pub fn extend(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The checksum of `bytes`.
pub fn value(bytes: &[u8]) -> u32 {
    extend(0, bytes)
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// The stored form of a checksum.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // RFC 3720 (iSCSI) test vectors.
        assert_eq!(value(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(value(&[0xffu8; 32]), 0x62a8_ab43);
        assert_eq!(value(b"123456789"), 0xe306_9283);
        assert_eq!(extend(value(b"1234"), b"56789"), value(b"123456789"));
        assert_ne!(mask(value(b"foo")), value(b"foo"));
        assert_eq!(unmask(mask(value(b"foo"))), value(b"foo"));
    }
}
