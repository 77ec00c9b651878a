//! Generates the Rust GraphDef and SavedModel types from `proto/*.proto` with
//! rust-protobuf's pure-Rust code generator (no `protoc` needed).

fn main() {
    println!("cargo:rerun-if-changed=proto/graph_def.proto");
    println!("cargo:rerun-if-changed=proto/saved_model.proto");
    println!("cargo:rerun-if-changed=build.rs");
    protobuf_codegen::Codegen::new()
        .pure()
        .include("proto")
        .input("proto/graph_def.proto")
        .input("proto/saved_model.proto")
        .cargo_out_dir("protos")
        .run_from_script();
}
