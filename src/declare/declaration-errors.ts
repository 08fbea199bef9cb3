import { fileURLToPath } from 'node:url'
import { ServegateError } from '../errors.ts'

/** servegate's own code: `src/` in a clone, `dist/` where the package is installed (both two levels above this file). */
const OWN = ['src', 'dist'].map((dir) => fileURLToPath(new URL(`../../${dir}/`, import.meta.url)))

/** Whether a stack line is a frame of servegate's own code (a spec or test file is the user's). */
function ownFrame(line: string): boolean {
  const at = /\(?((?:file:\/\/)?[^\s()]+?)(?:\?[^\s():]*)?:\d+:\d+\)?$/.exec(line.trim())?.[1]
  if (at === undefined) return false
  const file = at.startsWith('file://') ? fileURLToPath(at) : at
  return OWN.some((dir) => file.startsWith(dir)) && !/\.(test|bench|demo)\.[cm]?[jt]s$/.test(file)
}

/**
 * A declaration's error as the spec's author meets it in vitest's output: one line that carries
 * the code (`ServegateError [FILE_INVALID]: …`, as Node names its own coded errors), a stack of the
 * spec's own frames only, so the code frame vitest draws is the declaration that failed (never
 * servegate's sources or its compiled files), and no cause, whose facts (the system error's code,
 * the path) the message already states.
 */
function asDeclarationError(error: ServegateError): ServegateError {
  const name = `ServegateError [${error.code}]`
  if (error.name === name) return error
  error.name = name
  const frames = (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line) && !ownFrame(line))
  error.stack = [`${name}: ${error.message}`, ...frames].join('\n')
  delete (error as { cause?: unknown }).cause
  return error
}

/**
 * Runs a declaration (`cell()`, `pair()`, `sweep()`, `capacity()`, `engine.*`): what it throws
 * for a bad option or a bad file reaches the spec's author as {@link asDeclarationError} shapes it.
 */
export function declaring<T>(declare: () => T): T {
  try {
    return declare()
  } catch (error) {
    throw error instanceof ServegateError ? asDeclarationError(error) : error
  }
}
