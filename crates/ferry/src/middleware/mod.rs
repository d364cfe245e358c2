//! Handler middleware.
