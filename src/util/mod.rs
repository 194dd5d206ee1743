pub mod bin;
pub mod text;
