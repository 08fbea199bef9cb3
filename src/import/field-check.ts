/** The check step of an import: a file of the wrong shape throws one line naming the field and the fix. */
import type { z } from 'zod'
import { ServegateError } from '../errors.ts'

function at(value: unknown, path: readonly PropertyKey[]): unknown {
  let v = value
  for (const key of path) {
    if (v === null || typeof v !== 'object') return undefined
    v = (v as Record<PropertyKey, unknown>)[key]
  }
  return v
}

function fieldName(path: readonly PropertyKey[]): string {
  let out = ''
  for (const key of path) out += typeof key === 'number' ? `[${key}]` : out === '' ? String(key) : `.${String(key)}`
  return out
}

function describeValue(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 39)}…` : v)}`
  if (typeof v === 'object') return 'an object'
  return `${typeof v} ${String(v)}`
}

/** Turns the first zod issue into one line: the field, what is wrong with it, the fix. */
export function invalidFieldError(error: z.ZodError, value: unknown, source: string, fix: string): ServegateError {
  const issue = error.issues[0]
  if (issue === undefined) return new ServegateError('FILE_INVALID', `${source}: not valid; ${fix}`)
  const name = fieldName(issue.path)
  const actual = at(value, issue.path)
  let what: string
  if (issue.path.length === 0) what = `is ${describeValue(value)}, not a JSON object`
  else if (actual === undefined) what = `field "${name}" is missing`
  else if (issue.code === 'invalid_type') what = `field "${name}" is ${describeValue(actual)}; expected ${issue.expected}`
  else what = `field "${name}" is ${describeValue(actual)}: ${issue.message}`
  return new ServegateError('FILE_INVALID', `${source}: ${what}; ${fix}`)
}

/** Checks that every per-request list has one entry per request; names the first that does not. */
export function checkListLengths(lists: Record<string, readonly unknown[] | null | undefined>, source: string, fix: string): number {
  const entries = Object.entries(lists).filter((e): e is [string, readonly unknown[]] => Array.isArray(e[1]))
  const [firstName, first] = entries[0] as [string, readonly unknown[]]
  for (const [name, list] of entries) {
    if (list.length !== first.length) {
      throw new ServegateError(
        'FILE_INVALID',
        `${source}: field "${name}" has ${list.length} entries but "${firstName}" has ${first.length}; ` +
          `every per-request list holds one entry per request; ${fix}`,
      )
    }
  }
  return first.length
}
