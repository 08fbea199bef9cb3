/**
 * The truth a client's inter-token gaps are judged against: the paced server's own record of
 * when it sent each chunk (`paced.ts --log FILE`), matched to the client's requests by the
 * sha256 of the request body, and the error of each client gap against the send gap it stands
 * for.
 */
import { readFile } from 'node:fs/promises'
import { z } from 'zod'
import { nearestRank } from '../src/metrics/distribution.ts'

/** One request of the paced server's send log: a line of `--log FILE`. */
const SendLogEntry = z.object({
  /** sha256 of the request body bytes the server received, hex. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  bodyBytes: z.int().nonnegative(),
  /** Token chunks the request asked for. */
  tokens: z.int().nonnegative(),
  /** Each token chunk's actual send time (the `"t"` it carried), monotonic ms, in order. */
  sendMs: z.array(z.number()),
})
export type SendLogEntry = z.infer<typeof SendLogEntry>

/**
 * The send log by body sha256. A digest logged twice (two requests with the same bytes) is left
 * out, listed in `ambiguous`: no gap can be matched to one of them.
 */
export interface SendLog {
  bySha256: Map<string, SendLogEntry>
  ambiguous: Set<string>
  requests: number
}

/** Parses the JSONL of `paced.ts --log FILE`. */
export function parseSendLog(text: string, source: string): SendLog {
  const bySha256 = new Map<string, SendLogEntry>()
  const ambiguous = new Set<string>()
  let requests = 0
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue
    const parsed = SendLogEntry.safeParse(JSON.parse(line))
    if (!parsed.success) throw new Error(`${source} line ${i + 1}: not a send-log entry: ${z.prettifyError(parsed.error)}`)
    requests++
    const entry = parsed.data
    if (bySha256.has(entry.sha256) || ambiguous.has(entry.sha256)) {
      bySha256.delete(entry.sha256)
      ambiguous.add(entry.sha256)
    } else {
      bySha256.set(entry.sha256, entry)
    }
  }
  return { bySha256, ambiguous, requests }
}

/**
 * Asks a paced server started with `--log FILE` to write what it logged since the last call
 * (`GET /log`) and reads it. Call it between runs, when no stream is in flight.
 */
export async function takeSendLog(origin: string): Promise<SendLog> {
  const response = await fetch(`${origin}/log`)
  if (!response.ok) throw new Error(`GET ${origin}/log: HTTP ${response.status}: ${await response.text()}`)
  const { file } = (await response.json()) as { file: string }
  return parseSendLog(await readFile(file, 'utf8'), file)
}

/** One request as a client measured it: the body digest it sent, and its gaps between content chunks. */
export interface ClientGaps {
  /** sha256 of the request body bytes the client sent (servegate's `wireSha256`), hex; null when unknown. */
  sha256: string | null
  /** Gaps between consecutive content chunks as the client stamped them, ms. */
  gapsMs: ArrayLike<number>
}

/** A client's gaps against the server's actual send gaps, over every matched request. */
export interface GapErrors {
  /** Requests the client reported. */
  requests: number
  /** Of them, those whose digest is in the send log once. */
  matched: number
  /** Matched requests whose gap count is not the server's chunk count − 1 (compared as far as both go). */
  incomplete: number
  /** Consecutive pairs of content chunks compared. */
  gaps: number
  /** Mean of |client gap − server send gap|, ms; null without gaps. */
  errorMeanMs: number | null
  /** Nearest-rank p99 of |client gap − server send gap|, ms; null without gaps. */
  errorP99Ms: number | null
  /** Mean of (client's first gap − server's first send gap) over the requests that have one, ms: a bias shows here. */
  firstGapSignedMeanMs: number | null
  /** The largest errors, signed, worst first, with where they fell: request (in the client's order) and gap. */
  worst: Array<{ request: number; gap: number; errorMs: number }>
}

/** Errors `gapErrors` lists in `worst`. */
const WORST = 5

/**
 * Compares each matched request's gaps with the server's: gap k of the client (between content
 * chunks k and k + 1) against `sendMs[k + 1] − sendMs[k]`. The match rule: the client's body
 * sha256 equals the sha256 the server took of the body bytes it received.
 * @example gapErrors([{ sha256: 'ab…', gapsMs: [10.2] }], log).errorMeanMs // |10.2 − server's gap|
 */
export function gapErrors(requests: Iterable<ClientGaps>, log: SendLog): GapErrors {
  const errors: number[] = []
  const worst: GapErrors['worst'] = []
  let firstSum = 0
  let firsts = 0
  let count = 0
  let matched = 0
  let incomplete = 0
  for (const r of requests) {
    const request = count++
    const entry = r.sha256 === null ? undefined : log.bySha256.get(r.sha256)
    if (entry === undefined) continue
    matched++
    const send = entry.sendMs
    if (r.gapsMs.length !== send.length - 1) incomplete++
    const n = Math.min(r.gapsMs.length, send.length - 1)
    for (let k = 0; k < n; k++) {
      const diff = (r.gapsMs[k] as number) - ((send[k + 1] as number) - (send[k] as number))
      errors.push(Math.abs(diff))
      if (worst.length < WORST || Math.abs(diff) > Math.abs((worst[WORST - 1] as GapErrors['worst'][number]).errorMs)) {
        worst.push({ request, gap: k, errorMs: diff })
        worst.sort((a, b) => Math.abs(b.errorMs) - Math.abs(a.errorMs))
        worst.length = Math.min(worst.length, WORST)
      }
      if (k === 0) {
        firstSum += diff
        firsts++
      }
    }
  }
  const sorted = Float64Array.from(errors).sort()
  return {
    requests: count,
    matched,
    incomplete,
    gaps: errors.length,
    errorMeanMs: errors.length === 0 ? null : errors.reduce((a, b) => a + b, 0) / errors.length,
    errorP99Ms: sorted.length === 0 ? null : nearestRank(sorted, 99),
    firstGapSignedMeanMs: firsts === 0 ? null : firstSum / firsts,
    worst,
  }
}
