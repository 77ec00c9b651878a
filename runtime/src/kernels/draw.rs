//! `DrawBoundingBoxes` and `DrawBoundingBoxesV2` (`tf.image.draw_bounding_boxes`, the
//! detection-model summaries): a copy of each NHWC image with each box's outline painted in
//! a colour from a table, as TensorFlow's `draw_bounding_box_op.cc` paints it.
//!
//! A box `[ymin, xmin, ymax, xmax]` (normalised) becomes pixel rows and columns
//! `trunc(y · (height − 1))` (the product in float32, truncated toward zero); an inverted
//! box or one wholly outside the image is skipped; each of the four edges is drawn only when
//! its row or column lies inside the image, clamped along its length. Box `k` takes colour
//! `k mod colours`; the table is `colors` (V2, when non-empty: its first `depth` channels)
//! or TensorFlow's ten default colours (for a one-channel image, the first channel of each
//! set to 1). Images are float32 here; float16 images run this kernel through the
//! half-precision wrapper, which rounds the colours as `static_cast<half>` does.

use autoclust_graph::{Node, Tensor};

use super::{arity, one, tensor_of, Inputs, PureFn};
use crate::error::{KResult, KernelError};

/// TensorFlow's default colour table (RGBA).
const DEFAULT_COLORS: [[f32; 4]; 10] = [
    [1.0, 1.0, 0.0, 1.0],
    [0.0, 0.0, 1.0, 1.0],
    [1.0, 0.0, 0.0, 1.0],
    [0.0, 1.0, 0.0, 1.0],
    [0.5, 0.0, 0.5, 1.0],
    [0.5, 0.5, 0.0, 1.0],
    [0.5, 0.0, 0.0, 1.0],
    [0.0, 0.0, 0.5, 1.0],
    [0.0, 1.0, 1.0, 1.0],
    [1.0, 0.0, 1.0, 1.0],
];

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    let v2 = match node.op.as_str() {
        "DrawBoundingBoxes" => false,
        "DrawBoundingBoxesV2" => true,
        _ => return Ok(None),
    };
    Ok(Some(Box::new(move |inp: Inputs| {
        arity(&inp, if v2 { 3 } else { 2 })?;
        one(draw(&inp[0], &inp[1], inp.get(2))?)
    })))
}

fn draw(images: &Tensor, boxes: &Tensor, colors: Option<&Tensor>) -> KResult<Tensor> {
    let bad = |m: String| Err(KernelError::invalid(m));
    if images.rank() != 4 {
        return bad("The rank of the images should be 4".into());
    }
    if boxes.rank() != 3 {
        return bad("The rank of the boxes tensor should be 3".into());
    }
    if images.shape[0] != boxes.shape[0] {
        return bad("The batch sizes should be the same".into());
    }
    let [batch, height, width, depth] = [images.shape[0], images.shape[1], images.shape[2], images.shape[3]];
    if !matches!(depth, 1 | 3 | 4) {
        return bad("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)".into());
    }
    if boxes.shape[2] != 4 {
        return bad(format!("The size of the third dimension of the box must be 4. Received: {}", boxes.shape[2]));
    }
    let pixels = images.as_f32().ok_or(KernelError::DType(images.dtype))?;
    let corners = boxes.as_f32().ok_or(KernelError::DType(boxes.dtype))?;
    let mut table: Vec<Vec<f32>> = Vec::new();
    if let Some(c) = colors {
        if c.rank() != 2 {
            return bad(format!("colors must be a 2-D matrix{:?}", c.shape));
        }
        if c.shape[1] < depth {
            return bad(format!("colors must have equal or more channels than the image provided: {:?}", c.shape));
        }
        let v = c.as_f32().ok_or(KernelError::DType(c.dtype))?;
        table = v.chunks(c.shape[1].max(1)).map(|row| row[..depth].to_vec()).collect();
    }
    if table.is_empty() {
        table = DEFAULT_COLORS.iter().map(|c| c[..depth].to_vec()).collect();
        if depth == 1 {
            table.iter_mut().for_each(|c| c[0] = 1.0);
        }
    }
    let mut out = pixels.to_vec();
    let (h, w) = (height as i64, width as i64);
    let num_boxes = boxes.shape[1];
    for b in 0..batch {
        for k in 0..num_boxes {
            let bx = &corners[(b * num_boxes + k) * 4..][..4];
            let color = &table[k % table.len()];
            // float32 product, then C++'s conversion to int64 (toward zero).
            let at = |x: f32, n: i64| (x * (n - 1) as f32) as i64;
            let (r0, c0, r1, c1) = (at(bx[0], h), at(bx[1], w), at(bx[2], h), at(bx[3], w));
            if r0 > r1 || c0 > c1 || r0 >= h || r1 < 0 || c0 >= w || c1 < 0 {
                continue;
            }
            let (r0c, r1c, c0c, c1c) = (r0.max(0), r1.min(h - 1), c0.max(0), c1.min(w - 1));
            let mut paint = |r: i64, c: i64| {
                let at = ((b * height + r as usize) * width + c as usize) * depth;
                out[at..at + depth].copy_from_slice(color);
            };
            for j in c0c..=c1c {
                if r0 >= 0 {
                    paint(r0, j);
                }
                if r1 < h {
                    paint(r1, j);
                }
            }
            for i in r0c..=r1c {
                if c0 >= 0 {
                    paint(i, c0);
                }
                if c1 < w {
                    paint(i, c1);
                }
            }
        }
    }
    Ok(tensor_of(images.shape.clone(), out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::tests_support::{node, run1};

    /// TensorFlow 2.21's `DrawBoundingBoxesV2` on a 5×6 image of 0.25: a box inside, one
    /// poking out at the top left (its top and left edges not drawn), an inverted one
    /// (skipped) and one poking out at the bottom right; colours alternate between the two
    /// rows of `colors` (channel 0 shown); with an empty `colors` and one channel, the default
    /// table's first channel is 1.
    #[test]
    fn boxes_are_drawn_as_tensorflow_draws_them() {
        let img = |depth: usize| Tensor::from_f32(vec![1, 5, 6, depth], vec![0.25; 30 * depth]).unwrap();
        let boxes = Tensor::from_f32(
            vec![1, 4, 4],
            vec![0.1, 0.2, 0.8, 0.9, -0.3, -0.5, 0.5, 0.4, 0.9, 0.9, 0.2, 0.2, 0.5, 0.5, 1.7, 1.9],
        )
        .unwrap();
        let colors = Tensor::from_f32(vec![2, 4], vec![0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6]).unwrap();
        let out = run1(&node("DrawBoundingBoxesV2", &[]), &[img(3), boxes.clone(), colors]).unwrap();
        let channel0: Vec<f32> = out.as_f32().unwrap().iter().step_by(3).copied().collect();
        let (q, a, b) = (0.25, 0.1, 0.9);
        #[rustfmt::skip]
        let want = [
            q, a, b, a, a, q,
            q, a, b, q, a, q,
            b, b, b, b, b, b,
            q, a, b, a, a, q,
            q, q, b, q, q, q,
        ];
        assert_eq!(channel0, want);
        assert_eq!(out.as_f32().unwrap()[3..9], [0.1, 0.2, 0.3, 0.9, 0.8, 0.7]);
        let empty = Tensor::from_f32(vec![0, 4], vec![]).unwrap();
        let out = run1(&node("DrawBoundingBoxesV2", &[]), &[img(1), boxes.clone(), empty]).unwrap();
        let want: Vec<f32> = want.iter().map(|&x| if x == q { q } else { 1.0 }).collect();
        assert_eq!(out.as_f32().unwrap(), &want[..]);
        let two = Tensor::from_f32(vec![1, 5, 6, 2], vec![0.0; 60]).unwrap();
        let e = run1(&node("DrawBoundingBoxes", &[]), &[two, boxes]).unwrap_err().to_string();
        assert!(e.contains("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)"), "{e}");
    }
}
