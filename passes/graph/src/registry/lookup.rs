//! Schemas of TensorFlow's lookup tables (`lookup_ops.cc`): the hash tables Keras'
//! `StringLookup`/`IntegerLookup`, `tf.lookup.StaticHashTable` and feature columns with a
//! vocabulary list build (`HashTableV2`, `MutableHashTableV2`, and `DenseHashTable`'s
//! `MutableDenseHashTableV2`), their initialisation
//! (`LookupTableImportV2`, `InitializeTableV2`, `InitializeTableFromTextFileV2`) and their uses
//! (`LookupTableFindV2`, `LookupTableInsertV2`, `LookupTableRemoveV2`, `LookupTableSizeV2`,
//! `LookupTableExportV2`), with TensorFlow's signatures and shape functions.
//!
//! A table is a session resource named by a `resource` handle, like a variable, but not a
//! variable: no variable op touches it and the JIT never takes a table op, so table ops stay
//! outside clusters (stateful, with no entry in the resource-operation table).

use super::{ArgSpec, AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, ShapeFn, TypeRule};
use crate::{DType, Shape};

type Shapes = Result<Vec<Shape>, String>;

const RES: TypeRule = TypeRule::Fixed(DType::Resource);
const TIN: TypeRule = TypeRule::Attr("Tin");
const TOUT: TypeRule = TypeRule::Attr("Tout");
const TKEY: TypeRule = TypeRule::Attr("Tkey");
const INT64: TypeRule = TypeRule::Fixed(DType::Int64);
const STRING: TypeRule = TypeRule::Fixed(DType::String);

const fn a(name: &'static str, ty: TypeRule) -> ArgSpec {
    ArgSpec { name, ty, number_attr: None }
}
const fn tattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Type, default: AttrDefault::Required, allowed: None }
}
const fn iattr(name: &'static str) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Required, allowed: None }
}
const fn idef(name: &'static str, d: i64) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Int, default: AttrDefault::Int(d), allowed: None }
}
const fn bdef(name: &'static str, d: bool) -> AttrSpec {
    AttrSpec { name, kind: AttrKind::Bool, default: AttrDefault::Bool(d), allowed: None }
}
const fn opt(name: &'static str, kind: AttrKind) -> AttrSpec {
    AttrSpec { name, kind, default: AttrDefault::Optional, allowed: None }
}

const fn op(
    name: &'static str,
    inputs: &'static [ArgSpec],
    outputs: &'static [ArgSpec],
    attrs: &'static [AttrSpec],
    shape_fn: ShapeFn,
) -> OpSchema {
    OpSchema {
        name,
        family: OpFamily::LookupTable,
        inputs,
        outputs,
        attrs,
        is_stateful: true,
        shape_fn,
        value_fn: None,
    }
}

/// `HashTableV2`'s and `MutableHashTableV2`'s attributes.
const TABLE_ATTRS: &[AttrSpec] = &[
    opt("container", AttrKind::String),
    opt("shared_name", AttrKind::String),
    bdef("use_node_name_sharing", false),
    tattr("key_dtype"),
    tattr("value_dtype"),
];
/// `MutableDenseHashTableV2`'s (`tf.lookup.experimental.DenseHashTable`).
const DENSE_TABLE_ATTRS: &[AttrSpec] = &[
    opt("container", AttrKind::String),
    opt("shared_name", AttrKind::String),
    bdef("use_node_name_sharing", false),
    tattr("key_dtype"),
    tattr("value_dtype"),
    opt("value_shape", AttrKind::Shape),
    idef("initial_num_buckets", 131072),
    opt("max_load_factor", AttrKind::Float),
];
const TIN_TOUT: &[AttrSpec] = &[tattr("Tin"), tattr("Tout")];

fn scalar(c: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::scalar(); c.out_types.len()])
}

fn handle_is_scalar(c: &InferCtx<'_>) -> Result<(), String> {
    match c.shape(0).rank() {
        Some(r) if r != 0 => Err(format!("table_handle must be a scalar, got shape {}", c.shape(0))),
        _ => Ok(()),
    }
}

/// `LookupTableFindV2`: one value per key, so the keys' shape (scalar values; a table of
/// vector values adds their shape, which inference does not know).
fn find(c: &InferCtx<'_>) -> Shapes {
    handle_is_scalar(c)?;
    Ok(vec![c.shape(1).clone()])
}

/// Import, initialise, insert: keys and values agree (scalar values) or not (vector values).
fn update(c: &InferCtx<'_>) -> Shapes {
    handle_is_scalar(c)?;
    Ok(Vec::new())
}

/// `LookupTableExportV2`: keys and values, one per entry.
fn export(_: &InferCtx<'_>) -> Shapes {
    Ok(vec![Shape::with_dims(vec![None]), Shape::unknown()])
}

pub(super) const OPS: &[OpSchema] = &[
    op("HashTableV2", &[], &[a("table_handle", RES)], TABLE_ATTRS, scalar),
    op("MutableHashTableV2", &[], &[a("table_handle", RES)], TABLE_ATTRS, scalar),
    op(
        "MutableDenseHashTableV2",
        &[a("empty_key", TypeRule::Attr("key_dtype")), a("deleted_key", TypeRule::Attr("key_dtype"))],
        &[a("table_handle", RES)],
        DENSE_TABLE_ATTRS,
        scalar,
    ),
    op("LookupTableImportV2", &[a("table_handle", RES), a("keys", TIN), a("values", TOUT)], &[], TIN_TOUT, update),
    op(
        "InitializeTableV2",
        &[a("table_handle", RES), a("keys", TKEY), a("values", TypeRule::Attr("Tval"))],
        &[],
        &[tattr("Tkey"), tattr("Tval")],
        update,
    ),
    op(
        "InitializeTableFromTextFileV2",
        &[a("table_handle", RES), a("filename", STRING)],
        &[],
        &[
            iattr("key_index"),
            iattr("value_index"),
            idef("vocab_size", -1),
            opt("delimiter", AttrKind::String),
            idef("offset", 0),
        ],
        update,
    ),
    op(
        "LookupTableFindV2",
        &[a("table_handle", RES), a("keys", TIN), a("default_value", TOUT)],
        &[a("values", TOUT)],
        TIN_TOUT,
        find,
    ),
    op("LookupTableInsertV2", &[a("table_handle", RES), a("keys", TIN), a("values", TOUT)], &[], TIN_TOUT, update),
    op("LookupTableRemoveV2", &[a("table_handle", RES), a("keys", TIN)], &[], &[tattr("Tin")], update),
    op("LookupTableSizeV2", &[a("table_handle", RES)], &[a("size", INT64)], &[], scalar),
    op(
        "LookupTableExportV2",
        &[a("table_handle", RES)],
        &[a("keys", TypeRule::Attr("Tkeys")), a("values", TypeRule::Attr("Tvalues"))],
        &[tattr("Tkeys"), tattr("Tvalues")],
        export,
    ),
];
