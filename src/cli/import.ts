import { ServegateError } from '../errors.ts'
import { IMPORT_FORMATS, type ImportFormat, importRunFile, writeJsonAtomic } from '../record/record-io.ts'
import { intFlag, parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'

export const IMPORT_HELP =
  'servegate import FILE --from FORMAT --out FILE [--line N] [--model NAME] — ' +
  "convert another harness's results into a servegate.run/v1 record" +
  `

  FILE            the results file to import
  --from FORMAT   vllm    the JSON of \`vllm bench serve --save-result\` (with or without --save-detailed)
                  sglang  the JSONL of \`python -m sglang.bench_serving --output-file\` (with or without --output-details)
                  anvil   an anvil-serving.benchmark/v1 record
                  auto    recognize the format by its keys
  --out FILE      where to write the servegate.run/v1 record (written atomically)
  --line N        the 1-based line of a JSON Lines file to import (default: the last run)
  --model NAME    the model to record when the file names none (SGLang's JSONL does not)

Without per-request lists the record is summary-only: requests is empty and the distributions
hold only the figures the source summarized.`

/** `servegate import`: reads another harness's results, writes a servegate.run/v1 record, prints one line. */
export async function importCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(
    'import',
    argv,
    {
      from: { type: 'string' },
      out: { type: 'string' },
      line: { type: 'string' },
      model: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    true,
  )
  if (values.help === true) {
    io.stdout.write(`${IMPORT_HELP}\n`)
    return 0
  }
  if (positionals.length !== 1) {
    throw new ServegateError(
      'CONFIG_INVALID',
      `import takes one results file, got ${positionals.length}; run servegate import FILE --from vllm|sglang|anvil|auto --out FILE`,
    )
  }
  const formats = IMPORT_FORMATS.join(', ')
  if (values.from === undefined) throw new ServegateError('CONFIG_INVALID', `--from is required; pass --from with one of ${formats}`)
  if (!(IMPORT_FORMATS as readonly string[]).includes(values.from)) {
    throw new ServegateError('CONFIG_INVALID', `--from: "${values.from}" is not valid; pass one of ${formats}`)
  }
  if (values.out === undefined || values.out === '') {
    throw new ServegateError('CONFIG_INVALID', '--out is required; pass --out FILE, the servegate.run/v1 record to write')
  }
  if (values.model === '') throw new ServegateError('CONFIG_INVALID', '--model: an empty name is not valid; pass the model name to record')
  const file = positionals[0] as string
  const line = intFlag('--line', values.line, 1)
  const record = await importRunFile(file, values.from as ImportFormat, { line, model: values.model })
  await writeJsonAtomic(values.out, record)

  const from = record.importedFrom?.schema ?? record.schema
  const shape =
    record.importedFrom?.perRequest === false
      ? `summary-only (no per-request data; ${record.completed} completed, ${record.failed} failed)`
      : `per-request: ${record.requests.length} requests, ${record.completed} ok, ${record.failed} failed`
  const where = line === undefined ? '' : ` line ${line}`
  io.stdout.write(`imported ${from} from ${file}${where}: ${shape}; wrote ${values.out}\n`)
  return 0
}
