//! The tuple arities remat implements its traits for, in one place: up to
//! 12 for what regions and checkpoints take (`RegionInput`, `RegionArg`,
//! `CheckpointInputs`), up to 8 for what they return (`RegionOutput`,
//! `CheckpointOutput`) and what `needs` takes.

/// Invokes `$m!` for tuples of 1 to 12 type parameters.
macro_rules! for_each_arity {
    ($m:ident) => {
        for_each_output_arity!($m);
        $m!(A B C D E F G H I);
        $m!(A B C D E F G H I J);
        $m!(A B C D E F G H I J K);
        $m!(A B C D E F G H I J K L);
    };
}

/// Invokes `$m!` for tuples of 1 to 8 type parameters.
macro_rules! for_each_output_arity {
    ($m:ident) => {
        $m!(A);
        $m!(A B);
        $m!(A B C);
        $m!(A B C D);
        $m!(A B C D E);
        $m!(A B C D E F);
        $m!(A B C D E F G);
        $m!(A B C D E F G H);
    };
}
