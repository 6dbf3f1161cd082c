/*
 * Copyright (c) 2023.
 *
 * This software is free software;
 *
 * You can redistribute it or modify it under terms of the MIT, Apache License or Zlib license
 */

//! This file contains a single struct `HuffmanTable` that
//! stores Huffman tables needed during `BitStream` decoding.
#![allow(clippy::similar_names, clippy::module_name_repetitions)]

use alloc::string::ToString;

use crate::errors::DecodeErrors;

/// Determines how many bits of lookahead we have for our bitstream decoder.
///
/// Sluice patch: 10 (zune-jpeg has 9). More codes, and more code + magnitude pairs of the
/// fast AC table, resolve in one lookup; the tables (1,024 entries) still sit in L1. With
/// tables derived once per thread (`recent`), deriving larger ones costs nothing. CPU per
/// image of Sluice's decode loop over 256x256 JPEGs: 9 bits 1.00, 10 bits 0.94, 11 bits
/// 0.95 (BENCHMARKS.md, "Performance close to the hardware"). The fast AC entry keeps the
/// bits consumed in 4 bits, so this must stay at most 15.
pub const HUFF_LOOKAHEAD: u8 = 10;

/// Sluice patch: bits the skip table of an AC table (`skip_lookup`) looks ahead.
pub const SKIP_LOOKAHEAD: u8 = 12;

/// A struct which contains necessary tables for decoding a JPEG
/// huffman encoded bitstream
#[derive(Clone)] // Sluice patch: for `recent` below
pub struct HuffmanTable {
    // element `[0]` of each array is unused
    /// largest code of length k
    pub(crate) maxcode: [i32; 18],
    /// offset for codes of length k
    /// Answers the question, where do code-lengths of length k end
    /// Element 0 is unused
    pub(crate) offset:  [i32; 18],
    /// lookup table for fast decoding
    ///
    /// top  bits above HUFF_LOOKAHEAD contain the code length.
    ///
    /// Lower (8) bits contain the symbol in order of increasing code length.
    pub(crate) lookup:  [i32; 1 << HUFF_LOOKAHEAD],

    /// A table which can be used to decode small AC coefficients and
    /// do an equivalent of receive_extend
    pub(crate) ac_lookup: Option<[i16; 1 << HUFF_LOOKAHEAD]>,

    /// Sluice patch: for an AC table, what the next `SKIP_LOOKAHEAD` bits hold as whole
    /// symbols (code and magnitude bits), for `BitStream::discard_mcu_block`, which only
    /// skips them: bits 0-3 the bits they take, bit 4 whether the last is an end of block,
    /// bits 5-11 the coefficient positions they advance (at most 64; an end of block none).
    /// 0: the first symbol does not fit. Made by `recent` the second time a thread needs
    /// the table (a data set's shared tables, not an image's own optimized ones, whose
    /// making would cost more than it saves), and shared between the copies it hands out.
    pub(crate) skip_lookup: Option<alloc::sync::Arc<[u16; 1 << SKIP_LOOKAHEAD]>>,

    /// Directly represent contents of a JPEG DHT marker
    ///
    /// \# number of symbols with codes of length `k` bits
    // bits[0] is unused
    /// Symbols in order of increasing code length
    pub(crate) values: [u8; 256]
}

impl HuffmanTable {
    pub fn new(
        codes: &[u8; 17], values: [u8; 256], is_dc: bool, is_progressive: bool
    ) -> Result<HuffmanTable, DecodeErrors> {
        // Sluice patch: a table this thread made recently from the same DHT contents is
        // copied rather than derived again (see `recent`).
        #[cfg(feature = "std")]
        return recent::get_or_make(codes, values, is_dc, is_progressive);
        #[cfg(not(feature = "std"))]
        return HuffmanTable::make(codes, values, is_dc, is_progressive);
    }

    /// The table `new` returns, derived from the DHT contents.
    fn make(
        codes: &[u8; 17], values: [u8; 256], is_dc: bool, is_progressive: bool
    ) -> Result<HuffmanTable, DecodeErrors> {
        let too_long_code = (i32::from(HUFF_LOOKAHEAD) + 1) << HUFF_LOOKAHEAD;
        let mut p = HuffmanTable {
            maxcode: [0; 18],
            offset: [0; 18],
            lookup: [too_long_code; 1 << HUFF_LOOKAHEAD],
            values,
            ac_lookup: None,
            skip_lookup: None
        };

        p.make_derived_table(is_dc, is_progressive, codes)?;

        Ok(p)
    }

    /// Create a new huffman tables with values that aren't fixed
    /// used by fill_mjpeg_tables
    pub fn new_unfilled(
        codes: &[u8; 17], values: &[u8], is_dc: bool, is_progressive: bool
    ) -> Result<HuffmanTable, DecodeErrors> {
        let mut buf = [0; 256];
        buf[..values.len()].copy_from_slice(values);
        HuffmanTable::new(codes, buf, is_dc, is_progressive)
    }

    /// Compute derived values for a Huffman table
    ///
    /// This routine performs some validation checks on the table
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_sign_loss,
        clippy::too_many_lines,
        clippy::needless_range_loop
    )]
    fn make_derived_table(
        &mut self, is_dc: bool, _is_progressive: bool, bits: &[u8; 17]
    ) -> Result<(), DecodeErrors> {
        // build a list of code size
        let mut huff_size = [0; 257];
        // Huffman code lengths
        let mut huff_code: [u32; 257] = [0; 257];
        // figure C.1 make table of Huffman code length for each symbol
        let mut p = 0;

        for l in 1..=16 {
            let mut i = i32::from(bits[l]);
            // table overrun is checked before ,so we dont need to check
            while i != 0 {
                huff_size[p] = l as u8;
                p += 1;
                i -= 1;
            }
        }

        huff_size[p] = 0;

        let num_symbols = p;
        // Generate the codes themselves
        // We also validate that the counts represent a legal Huffman code tree
        let mut code = 0;
        let mut si = i32::from(huff_size[0]);

        p = 0;

        while huff_size[p] != 0 {
            while i32::from(huff_size[p]) == si {
                huff_code[p] = code;
                code += 1;
                p += 1;
            }
            // maximum code of length si, pre-shifted by 16-k bits
            self.maxcode[si as usize] = (code << (16 - si)) as i32;
            // code is now 1 more than the last code used for code-length si; but
            // it must still fit in si bits, since no code is allowed to be all ones.
            if (code as i32) >= (1 << si) {
                return Err(DecodeErrors::HuffmanDecode("Bad Huffman Table".to_string()));
            }

            code <<= 1;
            si += 1;
        }

        // Figure F.15 generate decoding tables for bit-sequential decoding
        p = 0;

        for l in 0..=16 {
            if bits[l] == 0 {
                // -1 if no codes of this length
                self.maxcode[l] = -1;
            } else {
                // offset[l]=codes[index of 1st symbol of code length l
                // minus minimum code of length l]
                self.offset[l] = (p as i32) - (huff_code[p]) as i32;
                p += usize::from(bits[l]);
            }
        }

        self.offset[17] = 0;
        // we ensure that decode terminates
        self.maxcode[17] = 0x000F_FFFF;

        /*
         * Compute lookahead tables to speed up decoding.
         * First we set all the table entries to 0(left justified), indicating "too long";
         * (Note too long was set during initialization)
         * then we iterate through the Huffman codes that are short enough and
         * fill in all the entries that correspond to bit sequences starting
         * with that code.
         */

        p = 0;

        for l in 1..=HUFF_LOOKAHEAD {
            for _ in 1..=i32::from(bits[usize::from(l)]) {
                // l -> Current code length,
                // p => Its index in self.code and self.values
                // Generate left justified code followed by all possible bit sequences
                let mut look_bits = (huff_code[p] as usize) << (HUFF_LOOKAHEAD - l);

                for _ in 0..1 << (HUFF_LOOKAHEAD - l) {
                    self.lookup[look_bits] =
                        (i32::from(l) << HUFF_LOOKAHEAD) | i32::from(self.values[p]);
                    look_bits += 1;
                }

                p += 1;
            }
        }
        // build an ac table that does an equivalent of decode and receive_extend
        if !is_dc {
            let mut fast = [255; 1 << HUFF_LOOKAHEAD];
            // Iterate over number of symbols
            for i in 0..num_symbols {
                // get code size for an item
                let s = huff_size[i];

                if s <= HUFF_LOOKAHEAD {
                    // if it's lower than what we need for our lookup table create the table
                    let c = (huff_code[i] << (HUFF_LOOKAHEAD - s)) as usize;
                    let m = (1 << (HUFF_LOOKAHEAD - s)) as usize;

                    for j in 0..m {
                        fast[c + j] = i as i16;
                    }
                }
            }

            // build a table that decodes both magnitude and value of small ACs in
            // one go.
            let mut fast_ac = [0; 1 << HUFF_LOOKAHEAD];

            for i in 0..(1 << HUFF_LOOKAHEAD) {
                let fast_v = fast[i];

                if fast_v < 255 {
                    // get symbol value from AC table
                    let rs = self.values[fast_v as usize];
                    // shift by 4 to get run length
                    let run = i16::from((rs >> 4) & 15);
                    // get magnitude bits stored at the lower 3 bits
                    let mag_bits = i16::from(rs & 15);
                    // length of the bit we've read
                    let len = i16::from(huff_size[fast_v as usize]);

                    if mag_bits != 0 && (len + mag_bits) <= i16::from(HUFF_LOOKAHEAD) {
                        // magnitude code followed by receive_extend code
                        let mut k = (((i as i16) << len) & ((1 << HUFF_LOOKAHEAD) - 1))
                            >> (i16::from(HUFF_LOOKAHEAD) - mag_bits);
                        let m = 1 << (mag_bits - 1);

                        if k < m {
                            k += (!0_i16 << mag_bits) + 1;
                        };

                        // if result is small enough fit into fast ac table
                        if (-128..=127).contains(&k) {
                            fast_ac[i] = (k << 8) + (run << 4) + (len + mag_bits);
                        }
                    }
                }
            }
            self.ac_lookup = Some(fast_ac);
        }

        // Validate symbols as being reasonable
        // For AC tables, we make no check, but accept all byte values 0..255
        // For DC tables, we require symbols to be in range 0..15
        if is_dc {
            for i in 0..num_symbols {
                let sym = self.values[i];

                if sym > 15 {
                    return Err(DecodeErrors::HuffmanDecode("Bad Huffman Table".to_string()));
                }
            }
        }

        Ok(())
    }
}

impl HuffmanTable {
    /// Sluice patch: the `skip_lookup` of an AC table, from its `lookup` and `ac_lookup`
    /// (filled first).
    ///
    /// For each value of the next `SKIP_LOOKAHEAD` bits: the whole symbols at their start
    /// that `discard_mcu_block`'s loop reads by shifting the bit buffer alone, as many as
    /// fit and advance at most 64 positions: a symbol with magnitude bits that its fast AC
    /// lookup decodes (code and magnitude in `HUFF_LOOKAHEAD` bits, advancing run + 1), a
    /// zero run of 16 (0xF0), and, last, an end of block (any other symbol of size 0). A
    /// symbol the loop would read through its slow path (whose magnitude read rotates bits
    /// into the buffer's unused end) is never included, so skipping leaves the bit buffer
    /// exactly as the loop would.
    fn skip_table(&self) -> [u16; 1 << SKIP_LOOKAHEAD] {
        let bits = usize::from(SKIP_LOOKAHEAD);
        let look = usize::from(HUFF_LOOKAHEAD);
        let mut table = [0_u16; 1 << SKIP_LOOKAHEAD];
        let Some(fast_ac) = self.ac_lookup.as_ref() else {
            return table;
        };
        for (index, entry) in table.iter_mut().enumerate() {
            let (mut used, mut advance, mut eob) = (0_usize, 0_usize, false);
            while used < bits {
                // The `HUFF_LOOKAHEAD` bits after `used`, zeros past the index's own: a code
                // (and its magnitude) that ends within the index does not depend on them.
                let peek = ((index << used) & ((1 << bits) - 1)) >> (bits - look);
                let found = self.lookup[peek];
                let len = (found >> HUFF_LOOKAHEAD) as usize;
                if len > look || used + len > bits {
                    break;
                }
                let symbol = (found & 0xFF) as usize;
                let (run, size) = (symbol >> 4, symbol & 15);
                let (take, step) = if size != 0 {
                    let fast = fast_ac[peek];
                    if fast == 0 {
                        break;
                    }
                    ((fast & 15) as usize, run + 1)
                } else if run == 15 {
                    (len, 16)
                } else {
                    used += len;
                    eob = true;
                    break;
                };
                if used + take > bits || advance + step > 64 {
                    break;
                }
                used += take;
                advance += step;
            }
            if used > 0 {
                *entry = ((advance << 5) | (usize::from(eob) << 4) | used) as u16;
            }
        }
        table
    }
}

/// Sluice patch: the tables each thread derived last.
///
/// A data set's JPEGs usually share their Huffman tables (an encoder's standard tables,
/// written into every file): deriving the four of a colour image (the lookup tables of
/// 2^`HUFF_LOOKAHEAD` entries) took 1.4 % of the CPU time of Sluice's `augment` pipeline
/// (256x256 images); copying a derived table is a fraction of that. The key is everything
/// `make` reads, so a copy is the table `make` would return; failures are not kept.
#[cfg(feature = "std")]
mod recent {
    use std::cell::RefCell;
    use std::vec::Vec;

    use super::HuffmanTable;
    use crate::errors::DecodeErrors;

    /// Tables kept per thread: a colour image's four, twice.
    const KEPT: usize = 8;

    struct Entry {
        codes:          [u8; 17],
        values:         [u8; 256],
        is_dc:          bool,
        is_progressive: bool,
        table:          HuffmanTable
    }

    /// The entries and the next one to replace once full.
    struct Recent {
        entries: Vec<Entry>,
        next:    usize
    }

    std::thread_local! {
        static RECENT: RefCell<Recent> = const {
            RefCell::new(Recent { entries: Vec::new(), next: 0 })
        };
    }

    pub(super) fn get_or_make(
        codes: &[u8; 17], values: [u8; 256], is_dc: bool, is_progressive: bool
    ) -> Result<HuffmanTable, DecodeErrors> {
        let hit = RECENT
            .try_with(|recent| {
                recent
                    .borrow_mut()
                    .entries
                    .iter_mut()
                    .find(|e| {
                        e.is_dc == is_dc
                            && e.is_progressive == is_progressive
                            && e.codes == *codes
                            && e.values == values
                    })
                    .map(|e| {
                        // Needed again: an AC table gets its skip table (once).
                        if !is_dc && e.table.skip_lookup.is_none() {
                            e.table.skip_lookup =
                                Some(alloc::sync::Arc::new(e.table.skip_table()));
                        }
                        e.table.clone()
                    })
            })
            .ok()
            .flatten();
        if let Some(table) = hit {
            return Ok(table);
        }
        let table = HuffmanTable::make(codes, values, is_dc, is_progressive)?;
        let entry = Entry {
            codes: *codes,
            values,
            is_dc,
            is_progressive,
            table: table.clone()
        };
        // (Only fails while the thread is being torn down: nothing is kept then.)
        let _ = RECENT.try_with(|recent| {
            let mut recent = recent.borrow_mut();
            if recent.entries.len() < KEPT {
                recent.entries.push(entry);
            } else {
                let i = recent.next;
                recent.entries[i] = entry;
                recent.next = (i + 1) % KEPT;
            }
        });
        Ok(table)
    }
}
