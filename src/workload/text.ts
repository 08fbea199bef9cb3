import { createRandom, mixSeed } from '../random.ts'

const NOUNS = (
  'team report river market engine city student garden council winter budget bridge harbor library ' +
  'signal orchard factory valley museum station'
).split(' ')
const ADJECTIVES = 'quiet early careful small northern busy steady bright narrow local annual recent formal open cold'.split(' ')
const VERBS = 'reviewed moved repaired measured described changed opened visited planned tested reported carried'.split(' ')
const PREPOSITIONS = 'near beside after before across under around'.split(' ')
const ADVERBS = 'slowly again later quickly finally together'.split(' ')

const IDENTS = 'total count value index limit offset buffer result items cache delta score weight'.split(' ')
const OPS = ['+', '-', '*', '//', '%']

/** A stream of whitespace-free pieces; `take(n)` gives the next n joined the way the kind reads. */
export interface TextSource {
  take(pieces: number): string
}

function pick<T>(random: () => number, list: readonly T[]): T {
  return list[Math.floor(random() * list.length)] as T
}

/** Plain prose: sentences of common words, so a summary is a natural task. */
export function proseSource(seed: number, stream: number): TextSource {
  const random = createRandom(mixSeed(seed, stream))
  const sentence = (): string[] => [
    'The',
    pick(random, ADJECTIVES),
    pick(random, NOUNS),
    pick(random, VERBS),
    'the',
    pick(random, NOUNS),
    pick(random, PREPOSITIONS),
    'the',
    pick(random, ADJECTIVES),
    `${pick(random, NOUNS)}`,
    `${pick(random, ADVERBS)}.`,
  ]
  return {
    take(n) {
      const out: string[] = []
      while (out.length < n) out.push(...sentence())
      return out.slice(0, n).join(' ')
    },
  }
}

/**
 * Code-like context: small functions that repeat with variations, as a repository file
 * does; pieces are whitespace-separated code tokens, lines keep their indentation.
 */
export function codeSource(seed: number, stream: number): TextSource {
  const random = createRandom(mixSeed(seed, stream))
  let fn = 0
  const func = (): Array<[indent: string, tokens: string[]]> => {
    fn++
    const [a, b] = [pick(random, IDENTS), pick(random, IDENTS)]
    const k = 1 + Math.floor(random() * 97)
    return [
      ['', ['def', `step_${fn}(${a},`, `${b}):`]],
      ['    ', [`${a}_next`, '=', a, pick(random, OPS), b, pick(random, OPS), String(k)]],
      ['    ', ['if', `${a}_next`, '>', `${k * 3}:`]],
      ['        ', ['return', `${a}_next`, pick(random, OPS), String(k)]],
      ['    ', ['return', b]],
    ]
  }
  return {
    take(n) {
      const lines: string[] = []
      let used = 0
      while (used < n) {
        for (const [indent, tokens] of func()) {
          if (used >= n) break
          const kept = tokens.slice(0, n - used)
          used += kept.length
          lines.push(indent + kept.join(' '))
        }
      }
      return lines.join('\n')
    },
  }
}
