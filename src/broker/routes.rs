//! The provider route table (being written).
