import { createRandom } from '../random.ts'

/** The sim's vocabulary: output tokens are these words, each with a leading space. */
export const SIM_WORDS = [
  'the', 'engine', 'streams', 'tokens', 'while', 'batch', 'grows', 'and', 'every', 'step',
  'takes', 'longer', 'than', 'before', 'so', 'each', 'request', 'waits', 'for', 'its',
  'turn', 'in', 'a', 'queue', 'of', 'prompts', 'that', 'fill', 'cache', 'with', 'keys', 'values',
] as const

/**
 * The sim's tokenizer: one token per whitespace-separated word.
 * @example countTokens('  hello   wide world ') // 3
 */
export function countTokens(text: string): number {
  const trimmed = text.trim()
  return trimmed === '' ? 0 : trimmed.split(/\s+/).length
}

/**
 * Token ids for `/tokenize`: a stable 32-bit FNV-1a hash of each word, bounded to a 50k vocabulary.
 */
export function tokenIds(text: string): number[] {
  const trimmed = text.trim()
  if (trimmed === '') return []
  return trimmed.split(/\s+/).map((word) => {
    let h = 0x811c9dc5
    for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 0x01000193)
    return (h >>> 0) % 50_000
  })
}

/**
 * A deterministic source of output tokens: each call returns one word with a leading space.
 * @example const next = createTokenSource(7); next() // ' batch' (always the same for seed 7)
 */
export function createTokenSource(seed: number): () => string {
  const random = createRandom(seed)
  return () => ` ${SIM_WORDS[Math.floor(random() * SIM_WORDS.length)] ?? SIM_WORDS[0]}`
}
