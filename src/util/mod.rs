pub mod bin;
pub mod ratelimit;
pub mod text;
