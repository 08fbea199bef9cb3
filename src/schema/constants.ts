/** Percentile method used everywhere in servegate: rank ⌈p·n⌉, 1-based, no interpolation. */
export const PERCENTILE_METHOD = 'nearest-rank'

/** Below this many samples a p99 is descriptive only (it is the max or near it). */
export const P99_MIN_SAMPLES = 100
