//! JPEG and PNG decoding, whole and windowed. The first byte picks the channels (`None`, 1,
//! 3, 4, or the invalid 2 / 5) and whether the window is mirrored; the next four place the
//! window (as fractions of the image's size, read from its header); the rest is the image.
//! Decodes with a 2^20-pixel limit: `decode_image`, `decode_window_with` (the windowed-crop
//! path that stops entropy decoding after the window), `decode_and_crop` with a window in
//! absolute coordinates (often outside the image) and `decode_jpeg_scaled`. Checks: no panic;
//! errors are the typed `sluice_image::Error` (an invalid channel count or a window outside
//! the image is `InvalidArgument`); when the whole image decodes, the window decode
//! succeeds too and its pixels are exactly the whole image's, cropped (and mirrored).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_image::Error;
use sluice_image::decode::{
    DecodeLimits, Window, decode_and_crop_with_limits, decode_image_with_limits,
    decode_jpeg_scaled_with_limits, decode_window_with,
};

fn expected_crop(full: &[u8], w: usize, c: usize, win: &Window) -> Vec<u8> {
    let mut out = Vec::with_capacity(win.height * win.width * c);
    for row in win.y..win.y + win.height {
        let line = &full[(row * w + win.x) * c..(row * w + win.x + win.width) * c];
        if win.mirror {
            for px in line.chunks(c).rev() {
                out.extend_from_slice(px);
            }
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [mode, fy, fx, fh, fw, image @ ..] = data else {
        return;
    };
    let channels = [None, Some(1), Some(3), Some(4), Some(2), Some(5)][(*mode % 6) as usize];
    let mirror = mode & 0x80 != 0;
    let limits = DecodeLimits::with_max_pixels(1 << 20);
    let bad_channels = matches!(channels, Some(2 | 5));

    let full = decode_image_with_limits(image, channels, &limits);
    if bad_channels {
        // Refused (or the bytes are not an image at all), never decoded.
        assert!(full.is_err());
    }
    let mut chosen = None;
    let window = decode_window_with(image, channels, &limits, &mut |h, w| {
        assert!(
            h > 0 && w > 0,
            "a zero-sized image reaches the window choice"
        );
        let y = *fy as usize * (h - 1) / 255;
        let x = *fx as usize * (w - 1) / 255;
        let height = 1 + *fh as usize * (h - y - 1) / 255;
        let width = 1 + *fw as usize * (w - x - 1) / 255;
        let win = Window {
            y,
            x,
            height,
            width,
            mirror,
        };
        chosen = Some(win);
        Ok(win)
    });
    if let Ok(full) = &full {
        let win = chosen.expect("the window was chosen");
        let crop =
            window.unwrap_or_else(|e| panic!("the whole image decodes, its window does not: {e}"));
        let [_, w, c] = full.shape() else {
            panic!("not HWC: {:?}", full.shape())
        };
        assert_eq!(crop.shape(), &[win.height, win.width, *c]);
        let want = expected_crop(full.as_u8().unwrap(), *w, *c, &win);
        assert!(
            crop.as_u8().unwrap() == want.as_slice(),
            "window {win:?} differs from the cropped decode"
        );
    } else if let Err(e) = &window {
        assert!(!e.to_string().is_empty());
    }

    // A window in absolute coordinates: outside the image it must be an InvalidArgument.
    let crop = (*fy as usize, *fx as usize, *fh as usize, *fw as usize);
    match decode_and_crop_with_limits(image, crop, channels, &limits) {
        Ok(t) => {
            assert_eq!(&t.shape()[..2], &[crop.2, crop.3]);
            if let Ok(full) = &full {
                let [h, w, c] = full.shape() else {
                    unreachable!()
                };
                assert!(crop.0 + crop.2 <= *h && crop.1 + crop.3 <= *w);
                let win = Window {
                    y: crop.0,
                    x: crop.1,
                    height: crop.2,
                    width: crop.3,
                    mirror: false,
                };
                assert!(
                    t.as_u8().unwrap()
                        == expected_crop(full.as_u8().unwrap(), *w, *c, &win).as_slice()
                );
            }
        }
        Err(e) => {
            if let Ok(full) = &full {
                let [h, w, _] = full.shape() else {
                    unreachable!()
                };
                let outside =
                    crop.2 == 0 || crop.3 == 0 || crop.0 + crop.2 > *h || crop.1 + crop.3 > *w;
                assert!(outside, "a window inside a decodable image failed: {e}");
                assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
            }
        }
    }

    let _ = decode_jpeg_scaled_with_limits(image, 1 + *fh as usize, 1 + *fw as usize, &limits);
});
