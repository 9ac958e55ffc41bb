//! Proves a parallel scan gives exactly the serial scan's results.
//! How: seeded random collections and pipelines, both ways, compared.
