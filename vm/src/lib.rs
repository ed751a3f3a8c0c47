//! Virtual machine (see issue: artifact + dataflow VM).
