//! Built-in tools and standard flows.
