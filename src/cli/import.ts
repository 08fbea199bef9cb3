import { basename, extname, join } from 'node:path'
import { ServegateError } from '../errors.ts'
import { IMPORT_FORMATS, type ImportedFile, type ImportedRunEntry, type ImportFormat, importRunFileRuns } from '../record/record-io.ts'
import { writeRunRecord } from '../record/record-writer.ts'
import type { RunRecord } from '../schema/run.ts'
import type { CliIo } from './cli-io.ts'
import { failedText } from './summary.ts'
import { intFlag, parseFlags } from './flags.ts'

const IMPORT_HELP =
  'servegate import FILE --from FORMAT --out FILE [--line N | --all] [--model NAME] — ' +
  "convert another harness's results into servegate.run/v1 records" +
  `

  FILE            the results file to import
  --from FORMAT   vllm      the JSON of \`vllm bench serve --save-result\` (with or without --save-detailed; --append-result: one run a line)
                  sglang    the JSONL of \`python -m sglang.bench_serving --output-file\` (it appends: one run a line)
                  aiperf    AIPerf's profile_export_aiperf.json or profile_export.jsonl (the other one beside it is read too)
                  guidellm  GuideLLM's benchmarks.json (one run per benchmark of the profile)
                  llmperf   llmperf's *_summary.json or *_individual_responses.json (the other one beside it is read too)
                  anvil     an anvil-serving.benchmark/v1 record
                  auto      recognize the format by its keys
  --out PATH      where to write the servegate.run/v1 record (written atomically); with --all, a directory
  --line N        the run to import from a multi-run file: a JSON Lines line, a GuideLLM benchmark (default: the last run)
  --all           import every run of a multi-run file, one record each, into the --out directory
  --model NAME    the model to record when the file names none (SGLang's JSONL does not)

Without per-request lists the record is summary-only: requests is empty and the distributions
hold only the figures the source summarized. See docs/migrating.md.`

function shapeOf(record: RunRecord): string {
  return record.importedFrom?.perRequest === false
    ? `summary-only (no per-request data; ${record.completed} completed, ${failedText(record)})`
    : `per-request: ${record.requests.length} requests, ${record.completed} ok, ${failedText(record)}`
}

function unitName(file: ImportedFile): string {
  return file.unit === 'benchmark' ? 'benchmark' : 'line'
}

/** `line 7 (the last of 7 runs; …)`: which run was taken, and how many the file holds. */
function whereText(file: ImportedFile, entry: ImportedRunEntry, lineGiven: boolean): string {
  const count = file.positions.length
  if (count <= 1) return lineGiven ? ` ${unitName(file)} ${entry.position}` : ''
  const last = file.positions[count - 1] === entry.position
  const which = last && !lineGiven ? `the last of ${count} runs` : `of ${count} runs`
  const warm = entry.warmup === true ? '; marked warm-up' : ''
  return ` ${unitName(file)} ${entry.position} (${which}${warm}; --line N picks another, --all imports each)`
}

function warmupSummary(file: ImportedFile): string {
  const marked = file.runs.filter((r) => r.warmup === true).map((r) => r.position)
  return marked.length === 0
    ? 'no run is marked warm-up (the file does not say which, if any, were)'
    : `warm-up: ${unitName(file)} ${marked.join(', ')} (marked by its tag or label)`
}

/** `servegate import`: reads another harness's results, writes servegate.run/v1 records, prints one line each. */
export async function importCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'import',
    argv,
    {
      from: { type: 'string' },
      out: { type: 'string' },
      line: { type: 'string' },
      all: { type: 'boolean' },
      model: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    true,
  )
  if (values.help === true) {
    io.stdout.write(`${IMPORT_HELP}\n`)
    return 0
  }
  const formats = IMPORT_FORMATS.join(', ')
  if (positionals.length !== 1) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `import takes one results file, got ${positionals.length}; run servegate import FILE --from ${IMPORT_FORMATS.join('|')} --out FILE`,
    )
  }
  if (values.from === undefined) throw new ServegateError('CONFIG_INVALID', `--from is required; pass --from with one of ${formats}`)
  if (!(IMPORT_FORMATS as readonly string[]).includes(values.from)) {
    throw new ServegateError('CONFIG_INVALID', `--from: "${values.from}" is not valid; pass one of ${formats}`)
  }
  if (values.out === undefined || values.out === '') {
    throw new ServegateError(
      'CONFIG_INVALID',
      values.all === true
        ? '--out is required; pass --out DIR, the directory for one servegate.run/v1 record per run'
        : '--out is required; pass --out FILE, the servegate.run/v1 record to write',
    )
  }
  if (values.model === '') throw new ServegateError('CONFIG_INVALID', '--model: an empty name is not valid; pass the model name to record')
  const line = intFlag('--line', values.line, 1)
  if (values.all === true && line !== undefined) {
    throw new ServegateError('CONFIG_INVALID', '--line and --all do not go together; pass --line N for one run or --all for every run')
  }
  const file = positionals[0] as string
  const imported = await importRunFileRuns(file, values.from as ImportFormat, { line, model: values.model, all: values.all === true })
  const companion = imported.companion === null ? '' : ` (with ${imported.companion})`

  if (values.all !== true) {
    const entry = imported.runs[0] as ImportedRunEntry
    await writeRunRecord(values.out, entry.record)
    const from = entry.record.importedFrom?.schema ?? entry.record.schema
    io.stdout.write(
      `imported ${from} from ${file}${whereText(imported, entry, line !== undefined)}${companion}: ${shapeOf(entry.record)}; wrote ${values.out}\n`,
    )
    return 0
  }

  const stem = basename(file, extname(file))
  const count = imported.positions.length
  io.stdout.write(`${file} holds ${count} run${count === 1 ? '' : 's'}${companion}; ${warmupSummary(imported)}\n`)
  for (const entry of imported.runs) {
    const out = join(values.out, count === 1 ? `${stem}.json` : `${stem}-${unitName(imported)}${entry.position}.json`)
    await writeRunRecord(out, entry.record)
    const from = entry.record.importedFrom?.schema ?? entry.record.schema
    const warm = entry.warmup === true ? ' (warm-up)' : ''
    io.stdout.write(`  ${unitName(imported)} ${entry.position}${warm}: ${from}, ${shapeOf(entry.record)}; wrote ${out}\n`)
  }
  return 0
}
