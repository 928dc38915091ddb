//! The sandbox image `po-sandbox:<digest>`: its recipe, digest and build.
