import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { ANVIL_SCHEMA_ID, AnvilRun, importAnvilRun } from '../import/anvil.ts'
import { RUN_SCHEMA_ID, RunRecord } from '../schema/run.ts'

/**
 * Writes JSON atomically: a temp file beside the target, then a rename, so a crash mid-write
 * leaves the previous file intact.
 */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`
  await writeFile(tmp, `${JSON.stringify(value, null, 2)}\n`)
  await rename(tmp, path)
}

/** Parses a run record from JSON: a servegate record as is, an anvil-serving record imported. */
export function parseRunRecord(value: unknown, source: string): RunRecord {
  const schema = (value as { schema?: unknown } | null)?.schema
  if (schema === RUN_SCHEMA_ID) {
    const result = RunRecord.safeParse(value)
    if (!result.success) {
      throw new ServegateError('FILE_INVALID', `${source}: not a valid ${RUN_SCHEMA_ID} record: ${z.prettifyError(result.error).split('\n').slice(0, 4).join('; ')}`)
    }
    return result.data
  }
  if (schema === ANVIL_SCHEMA_ID) {
    const result = AnvilRun.safeParse(value)
    if (!result.success) {
      throw new ServegateError('FILE_INVALID', `${source}: not a valid ${ANVIL_SCHEMA_ID} record: ${z.prettifyError(result.error).split('\n').slice(0, 4).join('; ')}`)
    }
    return importAnvilRun(result.data)
  }
  throw new ServegateError('FILE_INVALID', `${source}: field "schema" is ${JSON.stringify(schema)}; expected "${RUN_SCHEMA_ID}" or "${ANVIL_SCHEMA_ID}"`)
}

/** Reads a run record file (servegate or anvil-serving v1). */
export async function readRunRecord(path: string): Promise<RunRecord> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    const code = (err as { code?: string }).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (code ?? 'unreadable')
    throw new ServegateError('FILE_INVALID', `cannot read ${path} (${why}); pass the path of a run record JSON file`, { cause: err })
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new ServegateError('FILE_INVALID', `${path} is not JSON (${(err as Error).message}); pass a run record JSON file`, { cause: err })
  }
  return parseRunRecord(value, path)
}
