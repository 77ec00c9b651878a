//! Schemas of the TensorList ops (`list_ops.cc`): the `DT_VARIANT` scalars Keras RNN loops,
//! `tf.TensorArray` in TF2 and while-loop gradient accumulators carry — creation
//! (`EmptyTensorList`, `TensorListReserve`, `TensorListFromTensor`), element access
//! (`TensorListGetItem`/`SetItem`/`PushBack`/`PopBack`), and whole-list ops (`Stack`,
//! `Gather`, `ConcatV2`, `Split`, `Resize`, `ScatterIntoExistingList`, `ElementShape`,
//! `Length`). An element's shape comes from the `element_shape` operand (−1 entries unknown).

use super::build::{arg as a, bool_attr_or as bdef, int_attr_or as idef, pure_op as op, type_attr as tattr};
use super::{AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{self, Int32, Int64};
use crate::{Dim, Shape};

type Shapes = Result<Vec<Shape>, String>;

const INDEX: &[DType] = &[Int32, Int64];
const fn ty(name: &'static str) -> TypeRule {
    TypeRule::Attr(name)
}

const ELEMENT_DTYPE: &[AttrSpec] = &[tattr("element_dtype", None)];
const LIST_ATTRS: &[AttrSpec] = &[tattr("element_dtype", None), tattr("shape_type", Some(INDEX))];
const I32: TypeRule = TypeRule::Fixed(Int32);
const VARIANT: TypeRule = TypeRule::Fixed(crate::DType::Variant);

/// The ops of this table.
/// A TensorList op's `element_shape` operand as a shape: a vector whose −1 entries are
/// unknown dimensions; a scalar (−1) or an unknown value is an unknown shape.
fn list_element_shape(c: &InferCtx<'_>, i: usize) -> Shape {
    match (c.shape(i).rank(), c.value(i)) {
        (Some(1), Some(v)) => Shape::with_dims(v.iter().map(|d| d.filter(|&x| x >= 0)).collect()),
        _ => Shape::unknown(),
    }
}

fn list_handle(_c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar()])
}

/// `TensorListGather`: `[len(indices)] + element_shape`.
fn list_gather(c: &InferCtx<'_>) -> Shapes {
    let n = c.shape(1).dims.as_ref().and_then(|d| d.first().copied().flatten());
    let elem = list_element_shape(c, 2);
    Ok(vec![match elem.dims {
        Some(d) => {
            let mut dims: Vec<Dim> = vec![n];
            dims.extend(d);
            Shape::with_dims(dims)
        }
        None => Shape::unknown(),
    }])
}

/// `TensorListConcatV2`: the concatenation and the int64 lengths of its pieces.
fn list_concat(_c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::unknown(), Shape::with_dims(vec![None])])
}

/// `TensorListElementShape`: a vector, or the scalar −1 for an unknown rank.
fn list_element_shape_out(_c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::unknown()])
}

fn list_length(_c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar()])
}

/// `TensorListGetItem`: an element (`element_shape` is operand 2).
fn list_get_item(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![list_element_shape(c, 2)])
}

/// `TensorListPopBack`: the shorter list and the element.
fn list_pop_back(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar(), list_element_shape(c, 1)])
}

/// `TensorListStack`: `[num_elements] + element_shape`.
fn list_stack(c: &InferCtx<'_>) -> Shapes {
    let elem = list_element_shape(c, 1);
    let n = c.attr_int("num_elements", -1);
    Ok(vec![match elem.dims {
        Some(d) => {
            let mut dims: Vec<Dim> = vec![(n >= 0).then_some(n)];
            dims.extend(d);
            Shape::with_dims(dims)
        }
        None => Shape::unknown(),
    }])
}

pub(super) static OPS: &[OpSchema] = &[
    op(
        "EmptyTensorList",
        OpFamily::Shape,
        &[a("element_shape", ty("shape_type")), a("max_num_elements", I32)],
        &[a("handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListReserve",
        OpFamily::Shape,
        &[a("element_shape", ty("shape_type")), a("num_elements", I32)],
        &[a("handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListFromTensor",
        OpFamily::Shape,
        &[a("tensor", ty("element_dtype")), a("element_shape", ty("shape_type"))],
        &[a("output_handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListGetItem",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("index", I32), a("element_shape", I32)],
        &[a("item", ty("element_dtype"))],
        ELEMENT_DTYPE,
        list_get_item,
    ),
    op(
        "TensorListSetItem",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("index", I32), a("item", ty("element_dtype"))],
        &[a("output_handle", VARIANT)],
        &[tattr("element_dtype", None), bdef("resize_if_index_out_of_bounds", false)],
        list_handle,
    ),
    op(
        "TensorListPushBack",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("tensor", ty("element_dtype"))],
        &[a("output_handle", VARIANT)],
        ELEMENT_DTYPE,
        list_handle,
    ),
    op(
        "TensorListPopBack",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("element_shape", I32)],
        &[a("output_handle", VARIANT), a("tensor", ty("element_dtype"))],
        ELEMENT_DTYPE,
        list_pop_back,
    ),
    op(
        "TensorListStack",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("element_shape", I32)],
        &[a("tensor", ty("element_dtype"))],
        &[tattr("element_dtype", None), idef("num_elements", -1)],
        list_stack,
    ),
    op(
        "TensorListGather",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("indices", I32), a("element_shape", I32)],
        &[a("values", ty("element_dtype"))],
        ELEMENT_DTYPE,
        list_gather,
    ),
    op(
        "TensorListConcatV2",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("element_shape", ty("shape_type")), a("leading_dims", TypeRule::Fixed(Int64))],
        &[a("tensor", ty("element_dtype")), a("lengths", TypeRule::Fixed(Int64))],
        LIST_ATTRS,
        list_concat,
    ),
    op(
        "TensorListSplit",
        OpFamily::Shape,
        &[a("tensor", ty("element_dtype")), a("element_shape", ty("shape_type")), a("lengths", TypeRule::Fixed(Int64))],
        &[a("output_handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListResize",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("size", I32)],
        &[a("output_handle", VARIANT)],
        &[],
        list_handle,
    ),
    op(
        "TensorListScatter",
        OpFamily::Shape,
        &[a("tensor", ty("element_dtype")), a("indices", I32), a("element_shape", ty("shape_type"))],
        &[a("output_handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListScatterV2",
        OpFamily::Shape,
        &[
            a("tensor", ty("element_dtype")),
            a("indices", I32),
            a("element_shape", ty("shape_type")),
            a("num_elements", I32),
        ],
        &[a("output_handle", VARIANT)],
        LIST_ATTRS,
        list_handle,
    ),
    op(
        "TensorListScatterIntoExistingList",
        OpFamily::Shape,
        &[a("input_handle", VARIANT), a("tensor", ty("element_dtype")), a("indices", I32)],
        &[a("output_handle", VARIANT)],
        ELEMENT_DTYPE,
        list_handle,
    ),
    op(
        "TensorListElementShape",
        OpFamily::Shape,
        &[a("input_handle", VARIANT)],
        &[a("element_shape", ty("shape_type"))],
        &[tattr("shape_type", Some(INDEX))],
        list_element_shape_out,
    ),
    op("TensorListLength", OpFamily::Shape, &[a("input_handle", VARIANT)], &[a("length", I32)], &[], list_length),
];
