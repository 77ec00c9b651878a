//! Schemas of the file ops (`io_ops.cc`): `ReadFile` (a file's bytes as a string scalar) and
//! `WriteFile` (stateful, no outputs: never pruned, merged or folded, and it runs where the
//! graph's edges put it); the checkpoint ops of TF1 `Saver` and TF2 `tf.train.Checkpoint`
//! graphs (`SaveV2`, `RestoreV2`, `MergeV2Checkpoints`, and the V1 `Save`/`Restore`, stateful) and the shard names they
//! use (`ShardedFilename`, `ShardedFilespec`). String inputs keep all of them out of every
//! cluster.

use super::build::{arg as a, bool_attr_or, int_attr_or, pure_op};
use super::shapes::none;
use super::{AttrDefault, AttrKind, AttrSpec, InferCtx, OpFamily, OpSchema, TypeRule};
use crate::DType::{Int32, String as Str};
use crate::Shape;

const STR: TypeRule = TypeRule::Fixed(Str);

fn scalar_out(_: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::scalar()])
}

/// `Restore`: one tensor whose shape only the checkpoint knows.
fn unknown_out(_: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    Ok(vec![Shape::unknown()])
}

/// `RestoreV2`: one tensor per dtype, shapes only the checkpoint knows.
fn restored(c: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
    let n = c.node.attr("dtypes").and_then(crate::AttrValue::as_type_list).map_or(0, <[crate::DType]>::len);
    Ok(vec![Shape::unknown(); n])
}

const DTYPES: AttrSpec =
    AttrSpec { name: "dtypes", kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None };
const I32: TypeRule = TypeRule::Fixed(Int32);

pub(super) const OPS: &[OpSchema] = &[
    OpSchema {
        is_stateful: true,
        ..pure_op(
            "SaveV2",
            OpFamily::Shape,
            &[
                a("prefix", STR),
                a("tensor_names", STR),
                a("shape_and_slices", STR),
                a("tensors", TypeRule::ListAttr("dtypes")),
            ],
            &[],
            &[DTYPES],
            none,
        )
    },
    OpSchema {
        is_stateful: true,
        ..pure_op(
            "RestoreV2",
            OpFamily::Shape,
            &[a("prefix", STR), a("tensor_names", STR), a("shape_and_slices", STR)],
            &[a("tensors", TypeRule::ListAttr("dtypes"))],
            &[DTYPES],
            restored,
        )
    },
    OpSchema {
        is_stateful: true,
        ..pure_op(
            "Save",
            OpFamily::Shape,
            &[a("filename", STR), a("tensor_names", STR), a("data", TypeRule::ListAttr("T"))],
            &[],
            &[AttrSpec { name: "T", kind: AttrKind::ListType, default: AttrDefault::Required, allowed: None }],
            none,
        )
    },
    OpSchema {
        is_stateful: true,
        ..pure_op(
            "Restore",
            OpFamily::Shape,
            &[a("file_pattern", STR), a("tensor_name", STR)],
            &[a("tensor", TypeRule::Attr("dt"))],
            &[
                AttrSpec { name: "dt", kind: AttrKind::Type, default: AttrDefault::Required, allowed: None },
                int_attr_or("preferred_shard", -1),
            ],
            unknown_out,
        )
    },
    OpSchema {
        is_stateful: true,
        ..pure_op(
            "MergeV2Checkpoints",
            OpFamily::Shape,
            &[a("checkpoint_prefixes", STR), a("destination_prefix", STR)],
            &[],
            &[bool_attr_or("delete_old_dirs", true), bool_attr_or("allow_missing_files", false)],
            none,
        )
    },
    pure_op(
        "ShardedFilename",
        OpFamily::Shape,
        &[a("basename", STR), a("shard", I32), a("num_shards", I32)],
        &[a("filename", STR)],
        &[],
        scalar_out,
    ),
    pure_op(
        "ShardedFilespec",
        OpFamily::Shape,
        &[a("basename", STR), a("num_shards", I32)],
        &[a("filename", STR)],
        &[],
        scalar_out,
    ),
    OpSchema {
        is_stateful: true,
        ..pure_op("ReadFile", OpFamily::Shape, &[a("filename", STR)], &[a("contents", STR)], &[], scalar_out)
    },
    OpSchema {
        is_stateful: true,
        ..pure_op("WriteFile", OpFamily::Shape, &[a("filename", STR), a("contents", STR)], &[], &[], none)
    },
];
