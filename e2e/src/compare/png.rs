//! Pixels to a PNG file and text to pixels, with no font or image library: labels are drawn from
//! the public-domain 8x8 glyphs of the `font8x8` crate, and the PNG is an RGB image with one zlib
//! stream (flate2) and crc32 chunk checksums (crc32fast). This keeps the charts free of any system
//! font dependency, in CI and in the Docker build alike.

use font8x8::UnicodeFonts;
use std::io::Write;

/// An RGB canvas, 3 bytes per pixel, rows top to bottom (plotters' bitmap buffer layout).
pub struct Canvas {
    pub width: u32,
    pub height: u32,
    pub pixels: Vec<u8>,
}

/// Glyph cell size in pixels at scale 1.
pub const GLYPH_PX: u32 = 8;

impl Canvas {
    pub fn new(width: u32, height: u32) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![255; (width * height * 3) as usize],
        }
    }

    fn put(&mut self, x: i64, y: i64, rgb: [u8; 3]) {
        if x < 0 || y < 0 || x >= i64::from(self.width) || y >= i64::from(self.height) {
            return;
        }
        let i = ((y as u64 * u64::from(self.width) + x as u64) * 3) as usize;
        self.pixels[i..i + 3].copy_from_slice(&rgb);
    }

    /// Draw `text` with its top-left corner at (x, y); each glyph pixel becomes scale x scale.
    /// Characters without a glyph are drawn as '?'.
    pub fn text(&mut self, x: i64, y: i64, text: &str, scale: u32, rgb: [u8; 3]) {
        let step = i64::from(GLYPH_PX * scale);
        for (i, ch) in text.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS
                .get(ch)
                .or_else(|| font8x8::BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            let gx = x + i as i64 * step;
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    // Bit 0 is the leftmost pixel in font8x8's layout.
                    if bits & (1 << col) != 0 {
                        for dy in 0..scale {
                            for dx in 0..scale {
                                let px = gx + i64::from(col * scale + dx);
                                let py = y + row as i64 * i64::from(scale) + i64::from(dy);
                                self.put(px, py, rgb);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fill the rectangle with corner (x, y), clipped to the canvas.
    pub fn fill_rect(&mut self, x: i64, y: i64, w: u32, h: u32, rgb: [u8; 3]) {
        for dy in 0..i64::from(h) {
            for dx in 0..i64::from(w) {
                self.put(x + dx, y + dy, rgb);
            }
        }
    }

    /// Width in pixels of `text` at `scale`.
    pub fn text_width(text: &str, scale: u32) -> u32 {
        text.chars().count() as u32 * GLYPH_PX * scale
    }

    /// Encode as PNG (8-bit RGB, no interlace, filter type 0 on every row).
    pub fn to_png(&self) -> std::io::Result<Vec<u8>> {
        let mut raw = Vec::with_capacity(self.pixels.len() + self.height as usize);
        let row_bytes = self.width as usize * 3;
        for row in self.pixels.chunks(row_bytes.max(1)) {
            raw.push(0);
            raw.extend_from_slice(row);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw)?;
        let idat = z.finish()?;
        let mut ihdr = Vec::with_capacity(13);
        ihdr.extend_from_slice(&self.width.to_be_bytes());
        ihdr.extend_from_slice(&self.height.to_be_bytes());
        // bit depth 8, colour type 2 (RGB), compression 0, filter 0, interlace 0.
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &idat);
        chunk(&mut out, b"IEND", &[]);
        Ok(out)
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_has_signature_chunks_and_valid_crcs() {
        let mut c = Canvas::new(20, 10);
        c.text(0, 0, "Hi", 1, [0, 0, 0]);
        assert!(c.pixels.contains(&0), "text drew nothing");
        let png = c.to_png().expect("encode");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes([png[16], png[17], png[18], png[19]]), 20);
        // IHDR crc covers type + 13 data bytes.
        let crc = crc32fast::hash(&png[12..29]);
        assert_eq!(crc.to_be_bytes(), png[29..33]);
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
    }
}
