import { access } from 'node:fs/promises'
import { ServegateError } from '../errors.ts'
import { computeCellMetrics } from '../metrics/cell-metrics.ts'
import { formatFixedPercent } from '../number-format.ts'
import { readRunRecord } from '../record/record-io.ts'
import { writeRunRecord } from '../record/record-writer.ts'
import type { CellMetrics, RunRecord } from '../schema/run.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { type ParsedRow, readDatasetAnswers, SCORERS, type Scorer, withScorer } from '../workload/dataset.ts'
import { scoreResponse } from '../workload/score.ts'
import type { CliIo } from './cli-io.ts'
import { parseFlags } from './flags.ts'

/** The text of `servegate rescore --help`. */
const RESCORE_HELP = `servegate rescore RECORD... [--dataset FILE] [--scorer KIND] [--write] [--json] — judge the replies a dataset run kept again

  RECORD          a servegate.run/v1 record of a dataset workload whose scored replies kept their text (outputText)
  --dataset FILE  the dataset whose reference answers judge them (default: the path each record names);
                  it must have as many rows as the record was measured on (request i is row i mod rows)
  --scorer KIND   judge every row with exact, numeric, choice or regex instead of the scorer the row names
  --write         replace each record in place (atomically); by default <name>.rescored.json is written beside it
  --json          print [{file, out, datasetMatches, before, after, changed, kept}] instead of lines

The engines are not run again: each kept reply is scored with this servegate's scorer, and the
record gets the new per-request scores, metrics.accuracy and a methodology.rescore note.`

/** One verdict that changed. */
interface ChangedScore {
  /** The request's index in the measured sequence. */
  index: number
  before: boolean
  after: boolean
  /** The new verdict's reason, e.g. `extracted 44, expected 44 ± 0`. */
  reason: string
}

/** A record judged again, with what changed. */
export interface Rescored {
  record: RunRecord
  before: CellMetrics['accuracy']
  after: CellMetrics['accuracy']
  changed: ChangedScore[]
  /** Scored replies without kept text (cut at the capture bound): their verdicts are left as they were. */
  kept: number
}

/** The dataset a record is judged against: its rows and the sha256 of its bytes, from `path`. */
export interface Answers {
  path: string
  rows: readonly ParsedRow[]
  sha256: string
}

/** The refusal of a record that has no reference answers. */
function notDataset(source: string, kind: string): ServegateError {
  return new ServegateError(
    'FILE_INVALID',
    `${source}: its workload is ${kind}, not a dataset, so it has no reference answers to judge against; pass the record of a dataset run`,
  )
}

/**
 * Scores a record's kept replies again against `answers` (request i is judged by row i mod rows,
 * as it was planned), and recomputes `metrics.accuracy` from the new scores. Pure: the record
 * passed in is not changed. Replies without kept text keep their verdict.
 * @param source the record's file, for error messages
 * @throws ServegateError `FILE_INVALID` when the record is not a dataset run, was measured on a
 *   dataset of another size, or kept no reply text
 * @example rescoreRecord(record, await readDatasetAnswers('qa.jsonl').then((a) => ({ path: 'qa.jsonl', ...a })), 'run.json')
 */
export function rescoreRecord(record: RunRecord, answers: Answers, source: string): Rescored {
  const measured = record.plan.workload.dataset
  if (record.plan.workload.kind !== 'dataset' || measured === null) throw notDataset(source, record.plan.workload.kind)
  if (answers.rows.length !== measured.rows) {
    throw new ServegateError(
      'FILE_INVALID',
      `${answers.path} has ${answers.rows.length} rows but ${source} was measured on ${measured.rows} (${measured.path}), ` +
        'so its requests would meet other questions; pass the dataset it was measured on with --dataset FILE',
    )
  }
  const scored = record.requests.filter((r) => r.score !== null)
  if (scored.length > 0 && scored.every((r) => r.outputText === null)) {
    throw new ServegateError(
      'FILE_INVALID',
      `${source}: none of its ${scored.length} scored replies kept its text (outputText), so there is nothing to judge again ` +
        '(a record written before servegate kept scored replies); rerun the cell',
    )
  }
  const changed: ChangedScore[] = []
  let kept = 0
  const requests = record.requests.map((r) => {
    if (r.score === null) return r
    if (r.outputText === null) {
      kept++
      return r
    }
    const score = scoreResponse(answers.rows[r.index % answers.rows.length] as ParsedRow, r.outputText)
    if (score.correct !== r.score.correct)
      changed.push({ index: r.index, before: r.score.correct, after: score.correct, reason: score.reason })
    return { ...r, score }
  })
  const after = computeCellMetrics(requests, record.metrics.wallClockMs).accuracy
  const note =
    `scores recomputed from the kept replies by servegate rescore ${SERVEGATE_VERSION} against ${answers.path} ` +
    `(sha256 ${answers.sha256}${answers.sha256 === measured.sha256 ? ', the dataset measured' : `; measured on ${measured.sha256}`}); ` +
    `accuracy was ${accuracyText(record.metrics.accuracy)}`
  return {
    record: { ...record, requests, metrics: { ...record.metrics, accuracy: after }, methodology: { ...record.methodology, rescore: note } },
    before: record.metrics.accuracy,
    after,
    changed,
    kept,
  }
}

/** `12/16 = 75.0% [50.5%, 89.8%]`, or `none scored`. */
function accuracyText(a: CellMetrics['accuracy']): string {
  if (a === null) return 'none scored'
  return `${a.correct}/${a.samples} = ${formatFixedPercent(a.rate)} [${formatFixedPercent(a.wilson95Low)}, ${formatFixedPercent(a.wilson95High)}]`
}

/** Where a rescored record goes without --write: `run.json` → `run.rescored.json`, beside it. */
export function rescoredPath(file: string): string {
  return file.endsWith('.json') ? `${file.slice(0, -'.json'.length)}.rescored.json` : `${file}.rescored.json`
}

const SHOWN_CHANGES = 10

/** The lines of one rescored record: old → new accuracy, the verdicts that changed, where it went. */
function report(file: string, out: string, answers: Answers, r: Rescored): string {
  const measured = r.record.plan.workload.dataset
  const nowRight = r.changed.filter((c) => c.after).length
  const lines = [
    `${file}: accuracy ${accuracyText(r.before)} → ${accuracyText(r.after)} (Wilson 95%); ` +
      `${r.changed.length} verdict(s) changed (${nowRight} now right, ${r.changed.length - nowRight} now wrong); wrote ${out}`,
  ]
  for (const c of r.changed.slice(0, SHOWN_CHANGES)) {
    lines.push(`  request ${c.index}: ${c.before ? 'right' : 'wrong'} → ${c.after ? 'right' : 'wrong'} (${c.reason})`)
  }
  if (r.changed.length > SHOWN_CHANGES) lines.push(`  … and ${r.changed.length - SHOWN_CHANGES} more (--json lists every one)`)
  if (measured !== null && measured.sha256 !== answers.sha256) {
    lines.push(
      `  note: ${answers.path} is not the file measured (sha256 ${answers.sha256.slice(0, 12)}…, measured ${measured.sha256.slice(0, 12)}…): ` +
        'rows are matched by position, so its prompts must be the ones sent',
    )
  }
  if (r.kept > 0) lines.push(`  note: ${r.kept} scored reply(ies) kept no text (cut at the capture bound): verdicts left as they were`)
  return lines.join('\n')
}

/**
 * `servegate rescore`: the kept replies of dataset run records judged again with this
 * servegate's scorer (after a scorer fix), without rerunning the engines. Every record is judged
 * before any is written, so a bad one leaves every file as it was.
 */
export async function rescoreCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'rescore',
    argv,
    {
      dataset: { type: 'string' },
      scorer: { type: 'string' },
      write: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    true,
  )
  if (values.help === true) {
    io.stdout.write(`${RESCORE_HELP}\n`)
    return 0
  }
  if (positionals.length === 0) {
    throw new ServegateError('CONFIG_INVALID', 'rescore needs at least one run record; run servegate rescore RECORD... [--dataset FILE]')
  }
  const scorer = values.scorer
  if (scorer !== undefined && !(SCORERS as readonly string[]).includes(scorer)) {
    throw new ServegateError('CONFIG_INVALID', `--scorer: "${scorer}" is not a scorer; pass one of ${SCORERS.join(', ')}`)
  }
  const datasets = new Map<string, Promise<Answers>>()
  const answersAt = (path: string): Promise<Answers> => {
    let read = datasets.get(path)
    if (read === undefined) {
      read = readDatasetAnswers(path).then(({ rows, sha256 }) => ({
        path,
        sha256,
        rows: scorer === undefined ? rows : rows.map((row) => withScorer(row, scorer as Scorer, path)),
      }))
      datasets.set(path, read)
    }
    return read
  }

  const results: Array<{ file: string; out: string; answers: Answers; rescored: Rescored }> = []
  for (const file of positionals) {
    const record = await readRunRecord(file)
    const path = values.dataset ?? record.plan.workload.dataset?.path
    if (path === undefined) throw notDataset(file, record.plan.workload.kind)
    if (values.dataset === undefined) {
      // The record names the dataset as it was given to the run, relative to the directory it ran in.
      await access(path).catch((err: unknown) => {
        throw new ServegateError(
          'FILE_INVALID',
          `${file} was measured on the dataset ${path}, which cannot be read from here (${(err as Error).message}); ` +
            'pass it with --dataset FILE',
          { cause: err },
        )
      })
    }
    const answers = await answersAt(path)
    results.push({ file, out: values.write === true ? file : rescoredPath(file), answers, rescored: rescoreRecord(record, answers, file) })
  }
  for (const r of results) await writeRunRecord(r.out, r.rescored.record)

  if (values.json === true) {
    const rows = results.map((r) => ({
      file: r.file,
      out: r.out,
      datasetMatches: r.answers.sha256 === r.rescored.record.plan.workload.dataset?.sha256,
      before: r.rescored.before,
      after: r.rescored.after,
      changed: r.rescored.changed,
      kept: r.rescored.kept,
    }))
    io.stdout.write(`${JSON.stringify(rows, null, 2)}\n`)
  } else {
    io.stdout.write(`${results.map((r) => report(r.file, r.out, r.answers, r.rescored)).join('\n')}\n`)
  }
  return 0
}
