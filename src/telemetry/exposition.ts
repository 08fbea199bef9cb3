/**
 * A parser for the Prometheus text exposition format (0.0.4, and the OpenMetrics lines an engine
 * may mix in: `# EOF`, exemplars, `_created`).
 *
 * Written here rather than taken from npm: the one parser there, parse-prometheus-text-format
 * 1.1.1 (Apache-2.0, last released 2019, no types), drops the `_sum` and `_count` of every
 * histogram that has labels besides `le` — all of vLLM's and SGLang's (`model_name`, `engine`) —
 * folds the buckets of different label sets into one, and throws on a `# HELP name` without text,
 * losing the whole scrape. A flat list of samples is all the scraper needs.
 */

/** One sample line: `name{label="value",…} value [timestamp]`. */
export interface ExpositionSample {
  name: string
  labels: Record<string, string>
  /** May be NaN or ±Infinity, as the format allows. */
  value: number
}

export interface Exposition {
  samples: ExpositionSample[]
  /** `# TYPE` declarations: family name → counter, gauge, histogram, summary, untyped… */
  types: Map<string, string>
  /** The first five lines that were not comments, blank or valid samples; all such lines are skipped. */
  invalidLines: string[]
  invalidLineCount: number
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/

/** A sample value: a float, `NaN`, `+Inf`/`Inf`, `-Inf`; null when it is none of them. */
export function parseSampleValue(raw: string): number | null {
  if (raw === 'NaN') return Number.NaN
  if (raw === '+Inf' || raw === 'Inf') return Number.POSITIVE_INFINITY
  if (raw === '-Inf') return Number.NEGATIVE_INFINITY
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(raw)) return null
  return Number(raw)
}

function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } | null {
  const labels: Record<string, string> = {}
  let i = start
  for (;;) {
    while (line[i] === ' ' || line[i] === '\t') i++
    if (line[i] === '}') return { labels, end: i + 1 }
    const name = LABEL_NAME.exec(line.slice(i))
    if (name === null) return null
    i += name[0].length
    while (line[i] === ' ' || line[i] === '\t') i++
    if (line[i] !== '=') return null
    i++
    while (line[i] === ' ' || line[i] === '\t') i++
    if (line[i] !== '"') return null
    i++
    let value = ''
    for (;;) {
      const c = line[i]
      if (c === undefined) return null
      if (c === '"') break
      if (c === '\\') {
        const next = line[i + 1]
        value += next === 'n' ? '\n' : next === '\\' ? '\\' : next === '"' ? '"' : `\\${next ?? ''}`
        i += 2
        continue
      }
      value += c
      i++
    }
    labels[name[0]] = value
    i++
    while (line[i] === ' ' || line[i] === '\t') i++
    if (line[i] === ',') i++
    else if (line[i] !== '}') return null
  }
}

/** One sample line, or null when it is not one. */
export function parseSampleLine(line: string): ExpositionSample | null {
  const name = NAME.exec(line)
  if (name === null) return null
  let i = name[0].length
  let labels: Record<string, string> = {}
  if (line[i] === '{') {
    const parsed = parseLabels(line, i + 1)
    if (parsed === null) return null
    labels = parsed.labels
    i = parsed.end
  }
  // Value, then an optional timestamp; an OpenMetrics exemplar starts at " # ".
  const rest = line.slice(i).split(' # ')[0] ?? ''
  const fields = rest.trim().split(/[ \t]+/)
  if (fields.length < 1 || fields.length > 2 || fields[0] === '') return null
  const value = parseSampleValue(fields[0] as string)
  if (value === null) return null
  return { name: name[0], labels, value }
}

/**
 * Parses an exposition body into its samples. Pure and lenient: an invalid line is skipped and
 * listed, never fatal to the rest of the scrape.
 * @example parseExposition('vllm:num_requests_running{engine="0",model_name="m"} 3.0').samples
 * // [{ name: 'vllm:num_requests_running', labels: { engine: '0', model_name: 'm' }, value: 3 }]
 */
export function parseExposition(text: string): Exposition {
  const samples: ExpositionSample[] = []
  const types = new Map<string, string>()
  const invalidLines: string[] = []
  let invalidLineCount = 0
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (line === '') continue
    if (line.startsWith('#')) {
      const type = /^#\s+TYPE\s+(\S+)\s+(\S+)/.exec(line)
      if (type !== null) types.set(type[1] as string, (type[2] as string).toLowerCase())
      continue
    }
    const sample = parseSampleLine(line)
    if (sample === null) {
      invalidLineCount++
      if (invalidLines.length < 5) invalidLines.push(line.slice(0, 200))
      continue
    }
    samples.push(sample)
  }
  return { samples, types, invalidLines, invalidLineCount }
}
