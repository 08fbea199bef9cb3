import type { DatasetRow } from './dataset.ts'

/** The verdict on one response. `extracted` is what was compared (null: nothing found). */
export interface ScoreResult {
  correct: boolean
  extracted: string | null
  /** Why, e.g. `no number found` or `extracted 41, expected 42 ± 0`. */
  reason: string
}

/**
 * Removes reasoning that leaked into the content: every `<think>…</think>` block; text up
 * to a stray `</think>` (templates that open the block in the prompt); and an unterminated
 * `<think>` with everything after it (a response cut off while thinking).
 * @example stripReasoning('<think>maybe 41</think>42') // '42'
 */
export function stripReasoning(content: string): string {
  let text = content.replace(/<think>[\s\S]*?<\/think>/gi, ' ')
  const close = text.toLowerCase().lastIndexOf('</think>')
  if (close !== -1) text = text.slice(close + '</think>'.length)
  const open = text.toLowerCase().indexOf('<think>')
  if (open !== -1) text = text.slice(0, open)
  return text.trim()
}

/** The argument of `\boxed{…}` starting at `open` (the index of `{`), braces balanced. */
function boxedArgument(text: string, open: number): string | null {
  let depth = 0
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++
    else if (text[i] === '}' && --depth === 0) return text.slice(open + 1, i)
  }
  return null
}

/**
 * The text after the last explicit final-answer marker — `Answer: X`, `Final answer: X`
 * (case-insensitive, markdown emphasis allowed, to the end of that line) or `\boxed{X}` —
 * or null when there is none.
 * @example finalAnswerSegment('so 41+1.\n**Final Answer:** 42') // '42'
 */
export function finalAnswerSegment(text: string): string | null {
  let best: { at: number; segment: string } | null = null
  for (const match of text.matchAll(/\banswer[\s*_]*[:：][\s*_]*([^\n]*)/gi)) {
    const segment = (match[1] ?? '').trim()
    if (segment !== '' && (best === null || match.index >= best.at)) best = { at: match.index, segment }
  }
  for (const match of text.matchAll(/\\boxed\s*\{/g)) {
    const argument = boxedArgument(text, match.index + match[0].length - 1)
    if (argument !== null && argument.trim() !== '' && (best === null || match.index >= best.at)) {
      best = { at: match.index, segment: argument.trim() }
    }
  }
  return best?.segment ?? null
}

const EDGE_CHARS = `\\s"'\`“”‘’«»„.,;:!?*_()\\[\\]{}`
const EDGES = new RegExp(`^[${EDGE_CHARS}]+|[${EDGE_CHARS}]+$`, 'gu')

/**
 * Normalization for the exact scorer: Unicode NFKC, lowercase, whitespace collapsed, and
 * surrounding quotes, brackets, markdown emphasis and punctuation (a trailing period) removed.
 * @example normalizeExact('  “Paris.” ') // 'paris'
 */
export function normalizeExact(text: string): string {
  return text.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').replace(EDGES, '')
}

/**
 * A number as written in prose: thousands separators (`1,234.5`), a sign (`-3`, `−3`, not the
 * hyphen of a range like `1-5`), decimals (`.5`), exponents (`3.0e2`); a `%` or unit after it
 * is ignored.
 */
const NUMBER = /(?<![\p{L}\p{N}.])([-−+]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE]([-+]?\d+))?/gu

/** Every number in the text, in order, with its parsed value. */
export function findNumbers(text: string): Array<{ text: string; value: number }> {
  const found: Array<{ text: string; value: number }> = []
  for (const match of text.normalize('NFKC').matchAll(NUMBER)) {
    const sign = match[1] === '-' || match[1] === '−' ? '-' : ''
    const digits = (match[2] as string).replaceAll(',', '')
    const value = Number(`${sign}${digits}${match[3] === undefined ? '' : `e${match[3]}`}`)
    if (Number.isFinite(value)) found.push({ text: match[0], value })
  }
  return found
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')
}

/**
 * The choice letter a text commits to, or null. In order: the whole text is one letter (any
 * case, brackets or punctuation around it allowed); an `answer is X` / `correct option is X`
 * phrase (the last one); the last standalone capital letter among the choices (`(B)`, `B.`,
 * `B)`, `bar B`). `first` takes the first standalone letter instead (for a final-answer
 * segment, where what follows the letter is justification).
 */
export function findChoice(text: string, choices: readonly string[], first = false): string | null {
  const letters = choices.map(escapeRegExp).join('|')
  const whole = normalizeExact(text).toUpperCase()
  if (choices.includes(whole)) return whole
  const standalone = `(?<![\\p{L}\\p{N}'’])(${letters})(?![\\p{L}\\p{N}'’])`
  if (!first) {
    const phrase = new RegExp(
      `\\b(?:answer|option|choice)\\s+(?:is|would\\s+be|=)\\s*:?\\s*(?:option\\s+|choice\\s+)?[*_("'“]*(${letters})(?![\\p{L}\\p{N}'’])`,
      'giu',
    )
    let last: string | null = null
    for (const match of text.matchAll(phrase)) {
      const letter = (match[1] as string).toUpperCase()
      // A lowercase letter counts only when nothing but punctuation follows it ("the answer is b.").
      if (letter === match[1] || /^[\s\p{P}]*$/u.test(text.slice((match.index ?? 0) + match[0].length))) last = letter
    }
    if (last !== null) return last
  }
  const bare = [...text.matchAll(new RegExp(standalone, 'gu'))]
  const pick = first ? bare[0] : bare.at(-1)
  return pick ? (pick[1] as string) : null
}

/**
 * Scores one response against a dataset row. Works on the message *content* only (never pass
 * `reasoning_content`); `<think>` reasoning leaked into the content is removed first. An
 * explicit final-answer marker (`Answer:`, `Final answer:`, `\boxed{}`; the last one) is
 * preferred; without one: exact compares the whole remaining text, numeric takes the last
 * number, choice the last standalone choice letter, regex tests the whole remaining text.
 * Pure.
 * @example scoreResponse({ scorer: 'numeric', answer: 42, … }, 'The answer is 1,024') // { correct: false, extracted: '1024', reason:
 * 'extracted 1024, expected 42 ± 0' }
 */
export function scoreResponse(row: DatasetRow, content: string): ScoreResult {
  const text = stripReasoning(content)
  if (text === '') {
    return { correct: false, extracted: null, reason: 'empty response (after removing <think> reasoning)' }
  }
  const segment = finalAnswerSegment(text)
  switch (row.scorer) {
    case 'exact': {
      const extracted = normalizeExact(segment ?? text)
      const expected = normalizeExact(String(row.answer))
      const correct = extracted === expected
      return { correct, extracted, reason: `extracted ${JSON.stringify(extracted)}, expected ${JSON.stringify(expected)}` }
    }
    case 'numeric': {
      const numbers = segment === null ? findNumbers(text) : findNumbers(segment)
      const found = segment === null ? numbers.at(-1) : numbers[0]
      if (!found) {
        return {
          correct: false,
          extracted: null,
          reason:
            segment === null
              ? 'no number found'
              : `no number found after the final-answer marker (${JSON.stringify(segment.slice(0, 40))})`,
        }
      }
      const allowed = row.tolerancePct === undefined ? (row.tolerance ?? 0) : (Math.abs(row.answer) * row.tolerancePct) / 100
      // A relative epsilon so that 0.1 + 0.2 still equals 0.3.
      const slack = 1e-9 * Math.max(1, Math.abs(row.answer))
      const correct = Math.abs(found.value - row.answer) <= allowed + slack
      const band = row.tolerancePct === undefined ? `± ${String(row.tolerance ?? 0)}` : `± ${String(row.tolerancePct)}%`
      const extracted = String(found.value)
      return { correct, extracted, reason: `extracted ${extracted}, expected ${String(row.answer)} ${band}` }
    }
    case 'choice': {
      const extracted = segment === null ? findChoice(text, row.choices) : findChoice(segment, row.choices, true)
      if (extracted === null) {
        const where = segment === null ? '' : ' after the final-answer marker'
        return { correct: false, extracted: null, reason: `no choice letter (${row.choices.join(', ')}) found${where}` }
      }
      return { correct: extracted === row.answer, extracted, reason: `extracted ${extracted}, expected ${row.answer}` }
    }
    case 'regex': {
      const pattern = new RegExp(row.pattern, row.flags)
      const match = pattern.exec(segment ?? text)
      return match
        ? { correct: true, extracted: match[0], reason: `/${row.pattern}/${row.flags} matched ${JSON.stringify(match[0])}` }
        : { correct: false, extracted: null, reason: `/${row.pattern}/${row.flags} did not match` }
    }
  }
}
