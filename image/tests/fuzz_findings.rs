//! Regression tests for what the fuzz campaign found in image decoding (`fuzz/`,
//! RELIABILITY.md "Fuzzing"), one per finding, named for it, on the finding's input
//! (`fuzz/regressions/image_decode/`).

use sluice_image::decode::{DecodeLimits, Window, decode_image_with_limits, decode_window_with};

/// A 64×64 JPEG of one bright colour.
fn bright_jpeg() -> Vec<u8> {
    let mut bright = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bright, 90)
        .encode(
            &[250u8; 64 * 64 * 3],
            64,
            64,
            image::ExtendedColorType::Rgb8,
        )
        .unwrap();
    bright
}

/// `image-window-differs`: a damaged baseline JPEG of 53×37 whose scan ends (at an early
/// EOI) before its last MCU rows. The decoder left those rows unwritten, and the windowed
/// decode writes into a buffer reused from the thread's previous decode: its window showed
/// the previous image's pixels where the whole decode (into a fresh buffer) showed zeros.
/// Rows a stream does not reach are now zeros whatever the buffer held.
#[test]
fn image_window_differs_rows_after_an_early_end_are_zeros_in_a_reused_buffer() {
    let data = include_bytes!("../../fuzz/regressions/image_decode/window-differs");
    let limits = DecodeLimits::with_max_pixels(1 << 20);
    let whole = |h, w| {
        Ok(Window {
            y: 0,
            x: 0,
            height: h,
            width: w,
            mirror: false,
        })
    };
    // The previous decode on this thread leaves a bright image in the reused buffer.
    decode_window_with(&bright_jpeg(), Some(3), &limits, &mut |h, w| whole(h, w)).unwrap();
    let (shape, win, matches) = window_matches_whole(data);
    assert_eq!(shape[..2], [37, 53]);
    assert!(
        matches,
        "window {win:?} differs from the whole decode's crop"
    );

    // The rows after the scan's early end are zeros, and the same whole decode after
    // another image is the same.
    let image = &data[5..];
    let full = decode_image_with_limits(image, None, &limits).unwrap();
    let row = 53 * shape[2];
    assert!(full.as_u8().unwrap()[36 * row..].iter().all(|&v| v == 0));
    decode_window_with(&bright_jpeg(), Some(3), &limits, &mut |h, w| whole(h, w)).unwrap();
    let again = decode_window_with(image, None, &limits, &mut |h, w| whole(h, w)).unwrap();
    assert_eq!(again.as_u8().unwrap(), full.as_u8().unwrap());
}

/// The fuzz input `data` (a mode byte: channels and mirror; the window as fractions of the
/// image; the image) decoded whole and through its window: the image's shape, the window,
/// and whether the window's pixels are exactly the whole decode's crop.
fn window_matches_whole(data: &[u8]) -> ([usize; 3], Window, bool) {
    window_matches_whole_if_decodable(data).expect("the whole image decodes")
}

/// [`window_matches_whole`], or `None` if the whole image does not decode.
fn window_matches_whole_if_decodable(data: &[u8]) -> Option<([usize; 3], Window, bool)> {
    let [mode, fy, fx, fh, fw, image @ ..] = data else {
        unreachable!()
    };
    let channels = [None, Some(1), Some(3), Some(4), Some(2), Some(5)][(*mode % 6) as usize];
    let limits = DecodeLimits::with_max_pixels(1 << 20);
    let full = decode_image_with_limits(image, channels, &limits).ok()?;
    let &[h, w, c] = full.shape() else {
        panic!("{:?}", full.shape())
    };
    let full = full.as_u8().unwrap();
    let mut chosen = None;
    let crop = decode_window_with(image, channels, &limits, &mut |hh, ww| {
        let y = usize::from(*fy) * (hh - 1) / 255;
        let x = usize::from(*fx) * (ww - 1) / 255;
        let win = Window {
            y,
            x,
            height: 1 + usize::from(*fh) * (hh - y - 1) / 255,
            width: 1 + usize::from(*fw) * (ww - x - 1) / 255,
            mirror: mode & 0x80 != 0,
        };
        chosen = Some(win);
        Ok(win)
    })
    .unwrap();
    let win = chosen.unwrap();
    let mut want = Vec::new();
    for row in win.y..win.y + win.height {
        let line = &full[(row * w + win.x) * c..(row * w + win.x + win.width) * c];
        if win.mirror {
            line.chunks(c)
                .rev()
                .for_each(|px| want.extend_from_slice(px));
        } else {
            want.extend_from_slice(line);
        }
    }
    Some(([h, w, c], win, crop.as_u8().unwrap() == want.as_slice()))
}

/// `image-window-after-second-sos`: a damaged grey JPEG of 1077×220 whose first scan ends
/// after one MCU row and whose stream then starts a second scan. zune-jpeg writes the second
/// scan's rows after those already written, but the window patch chose the blocks to
/// transform (and the row to stop after) by the scan's own row counter, which starts again
/// at 0: the window's rows 8-15 were never transformed (zeros where the whole decode has
/// pixels). A window decode now stops at a second scan and the whole image is decoded.
#[test]
fn image_window_after_second_sos_is_the_whole_decode_s_crop() {
    let data = include_bytes!("../../fuzz/regressions/image_decode/window-after-second-sos");
    let (shape, win, matches) = window_matches_whole(data);
    assert_eq!(shape, [220, 1077, 1]);
    assert_eq!(
        (win.y, win.height),
        (8, 83),
        "the window starts in the second MCU row"
    );
    assert!(
        matches,
        "window {win:?} differs from the whole decode's crop"
    );
}

/// `image-window-second-sos-upsampled` (found by CI's replay of the corpus against a first
/// fix of the finding above, which made the window follow the rows written): a 4:2:0 JPEG
/// of 53×37 with a DHT and a second scan after an early end of the first. Following the rows
/// written, one chroma value of the window's last row differed (the upsampler starts again
/// with the second scan). With the fix kept (the whole image decoded at a second scan) it
/// matches.
#[test]
fn image_window_second_sos_upsampled_is_the_whole_decode_s_crop() {
    let data = include_bytes!("../../fuzz/regressions/image_decode/window-second-sos-upsampled");
    let (shape, win, matches) = window_matches_whole(data);
    assert_eq!(shape, [37, 53, 3]);
    assert!(
        matches,
        "window {win:?} differs from the whole decode's crop"
    );
}

/// `image-window-subsampled-luma` (found by CI's fuzz run, a one-byte change of a corpus
/// input; the width and height then made small): a 2×48 JPEG whose first component is
/// sampled 2×1, the second 2×1 and the third 4×1, so the first is the one subsampled. The
/// window patch chose the blocks of a window's columns as if each component's sample for
/// pixel x were at x * h / h_max, which zune-jpeg's decoding of this layout does not
/// follow: the 1×1 window in the last column differed from the whole decode. Layouts other
/// than a full-resolution first component with others at full or half resolution now have
/// every block transformed.
#[test]
fn image_window_subsampled_luma_is_the_whole_decode_s_crop() {
    let data = include_bytes!("../../fuzz/regressions/image_decode/window-subsampled-luma");
    let (shape, win, matches) = window_matches_whole(data);
    assert_eq!(shape, [2, 48, 3]);
    assert_eq!((win.y, win.x, win.height, win.width), (1, 47, 1, 1));
    assert!(
        matches,
        "window {win:?} differs from the whole decode's crop"
    );
}

/// The finding above over every layout of three components sampled 1, 2 or 4 times along
/// each axis (the bytes of the frame header that hold them), for grey, RGB and RGBA
/// output, and windows in a corner, in the middle and of the whole image: each window is
/// the whole decode's crop.
#[test]
fn every_sampling_layout_s_window_is_the_whole_decode_s_crop() {
    let data = include_bytes!("../../fuzz/regressions/image_decode/window-subsampled-luma");
    // The sampling bytes of the three components in the frame header (after the 5-byte
    // prefix of the fuzz input).
    let sampling = [174, 177, 180];
    for &off in &sampling {
        assert_eq!(data[off - 1], (off as u8 - 174) / 3 + 1, "component id");
    }
    let factors = [1u8, 2, 4];
    let layouts: Vec<u8> = factors
        .iter()
        .flat_map(|h| factors.iter().map(move |v| (h << 4) | v))
        .collect();
    // (mode, fy, fx, fh, fw): grey / RGB / RGBA output and where the window is.
    let windows = [
        [1, 0, 0, 255, 255],
        [2, 255, 255, 0, 0],
        [3, 0, 100, 255, 60],
        [0x82, 0, 128, 255, 90],
    ];
    let mut checked = 0;
    for &a in &layouts {
        for &b in &layouts {
            for &c in &layouts {
                for window in &windows {
                    let mut input = data.to_vec();
                    input[..5].copy_from_slice(window);
                    for (&off, v) in sampling.iter().zip([a, b, c]) {
                        input[off] = v;
                    }
                    if let Some((_, win, matches)) = window_matches_whole_if_decodable(&input) {
                        assert!(
                            matches,
                            "sampling {a:02x} {b:02x} {c:02x}: window {win:?} differs from \
                             the whole decode's crop"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(
        checked > 1500,
        "only {checked} of 2,916 layouts and windows decoded"
    );
}
