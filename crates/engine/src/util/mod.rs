pub mod bin;
pub mod hash;
pub mod ratelimit;
pub mod sync;
pub mod text;
