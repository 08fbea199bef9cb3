/**
 * Mixes two 32-bit integers into one (a murmur3-style finalizer), so nearby seeds and indices
 * give unrelated streams.
 */
export function mixSeed(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x632be5ab, 0xc2b2ae35)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/**
 * A seeded PRNG (mulberry32): the same seed yields the same sequence on every platform.
 * @returns a function giving numbers in [0, 1)
 */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/**
 * A standard normal variate by Box–Muller (two uniforms per variate; the sine half is dropped
 * so a stream of variates depends only on the draws it made).
 */
export function normalVariate(random: () => number): number {
  const u = 1 - random()
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random())
}

/** An exponential variate with mean 1, by inversion. */
export function exponentialVariate(random: () => number): number {
  return -Math.log(1 - random())
}

/**
 * A gamma variate with the given shape and scale 1 (mean = shape): Marsaglia and Tsang (2000)
 * for shape ≥ 1; for shape < 1, Gamma(shape + 1)·U^(1/shape) (their boost).
 * @param shape > 0
 */
export function gammaVariate(random: () => number, shape: number): number {
  if (!(shape > 0 && Number.isFinite(shape))) throw new RangeError(`gammaVariate: shape must be a positive number, got ${shape}`)
  if (shape < 1) return gammaVariate(random, shape + 1) * (1 - random()) ** (1 / shape)
  const d = shape - 1 / 3
  const c = 1 / Math.sqrt(9 * d)
  for (;;) {
    let x: number
    let v: number
    do {
      x = normalVariate(random)
      v = 1 + c * x
    } while (v <= 0)
    v = v * v * v
    const u = 1 - random()
    if (u < 1 - 0.0331 * x ** 4 || Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v
  }
}
