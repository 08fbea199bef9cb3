import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, isAbsolute, resolve } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'

/** The letters a `choice` row allows when it does not list its own. */
const DEFAULT_CHOICES = ['A', 'B', 'C', 'D', 'E'] as const

const FIELD_HINTS: Record<string, string> = {
  id: 'a non-empty string unique in the file, e.g. "add-01"',
  prompt: 'the question as a non-empty string',
  answer: 'the reference answer, a string or a number',
  scorer: 'one of "exact", "numeric", "choice", "regex"',
  tolerance: 'a non-negative absolute tolerance, e.g. 0.5',
  tolerancePct: 'a non-negative relative tolerance in percent, e.g. 5',
  pattern: 'a JavaScript regular expression source, e.g. "^\\\\d+$"',
  flags: 'regular expression flags from "imsu", e.g. "i"',
  choices: 'an array of distinct single capital letters, e.g. ["A","B","C","D"]',
  images: 'an array of image paths relative to the dataset file or data:image/png;base64,… URIs',
}

/** Which scorer uses a scorer-specific field: a misplaced one gets a pointed message. */
const FIELD_SCORER: Record<string, string> = {
  tolerance: 'numeric',
  tolerancePct: 'numeric',
  choices: 'choice',
  pattern: 'regex',
  flags: 'regex',
}

const ImageRef = z
  .string()
  .min(1)
  .superRefine((ref, ctx) => {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(ref)) {
      ctx.addIssue({
        code: 'custom',
        message:
          `is a URL (${ref.slice(0, 60)}); download the image next to the dataset and reference its relative path, ` +
          'so the request hash covers its bytes',
      })
    } else if (!ref.startsWith('data:') && isAbsolute(ref)) {
      ctx.addIssue({ code: 'custom', message: `is an absolute path (${ref}); use a path relative to the dataset file` })
    }
  })

const common = {
  /** Stable question id; pairs the same question across arms. Defaults to `line-<n>`. */
  id: z.string().min(1).optional(),
  prompt: z.string().min(1),
  /**
   * Images sent before the prompt, as written in the file: paths relative to the dataset file
   * or `data:image/…;base64,` URIs. After `loadDataset`, always data URIs.
   * @default []
   */
  images: z.array(ImageRef).default([]),
}

const ExactRow = z.strictObject({
  ...common,
  scorer: z.literal('exact'),
  /** Compared after normalization (NFKC, lowercase, whitespace collapsed, outer punctuation removed). */
  answer: z.union([z.string().min(1), z.number()]),
})

const NumericRow = z
  .strictObject({
    ...common,
    scorer: z.literal('numeric'),
    answer: z.number(),
    /** Absolute tolerance: correct when |x − answer| ≤ tolerance. @default 0 */
    tolerance: z.number().nonnegative().optional(),
    /** Relative tolerance in percent of |answer|; exclusive with `tolerance`. */
    tolerancePct: z.number().nonnegative().optional(),
  })
  .superRefine((row, ctx) => {
    if (row.tolerance !== undefined && row.tolerancePct !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['tolerancePct'],
        message: 'field `tolerancePct` is set together with `tolerance`; keep only one of them',
      })
    }
  })

const ChoiceRow = z
  .strictObject({
    ...common,
    scorer: z.literal('choice'),
    /** The correct letter, one of `choices`. */
    answer: z.string(),
    /** The letters allowed. @default ["A","B","C","D","E"] */
    choices: z
      .array(z.string().regex(/^[A-Z]$/, 'must be a single capital letter'))
      .min(2)
      .default([...DEFAULT_CHOICES]),
  })
  .superRefine((row, ctx) => {
    const seen = new Set<string>()
    for (const letter of row.choices) {
      if (seen.has(letter)) {
        ctx.addIssue({
          code: 'custom',
          path: ['choices'],
          message: `field \`choices\` lists "${letter}" twice; list each letter once`,
        })
        return
      }
      seen.add(letter)
    }
    if (!seen.has(row.answer)) {
      ctx.addIssue({
        code: 'custom',
        path: ['answer'],
        message:
          `field \`answer\` "${row.answer}" is not one of the choices ${row.choices.join(', ')}; ` +
          'set it to one of those letters (capital) or add it to `choices`',
      })
    }
  })

const RegexRow = z
  .strictObject({
    ...common,
    scorer: z.literal('regex'),
    /** Informational for the regex scorer: the pattern decides. */
    answer: z.union([z.string(), z.number()]),
    /** The response (or its final-answer segment) must match this pattern. */
    pattern: z.string().min(1),
    /** Flags for `pattern`, from `imsu`. @default "" */
    flags: z
      .string()
      .regex(/^[imsu]*$/, 'may only contain i, m, s, u')
      .default(''),
  })
  .superRefine((row, ctx) => {
    try {
      new RegExp(row.pattern, row.flags)
    } catch (error) {
      ctx.addIssue({
        code: 'custom',
        path: ['pattern'],
        message:
          `field \`pattern\` is not a valid regular expression (${(error as Error).message}); ` +
          `fix it (remember to escape backslashes in JSON: "\\\\d")`,
      })
    }
  })

/**
 * One line of a scored dataset file (JSONL). The `scorer` decides which other fields apply;
 * unknown or misplaced fields are errors, so a typo never silently changes scoring.
 * @example {"id":"add-01","prompt":"What is 17 + 25? Reply with the number only.","answer":42,"scorer":"numeric"}
 */
export const DatasetRow = z.discriminatedUnion('scorer', [ExactRow, NumericRow, ChoiceRow, RegexRow])
export type DatasetRow = z.infer<typeof DatasetRow>
export type DatasetRowInput = z.input<typeof DatasetRow>

export const SCORERS = ['exact', 'numeric', 'choice', 'regex'] as const
export type Scorer = DatasetRow['scorer']

/** A row with defaults filled: its `id` (given or `line-<n>`) and its 1-based line in the file. */
export type ParsedRow = DatasetRow & { id: string; line: number }

/** A parsed row whose `images` are all `data:image/…;base64,` URIs, ready to send. */
export type ResolvedRow = ParsedRow

export interface LoadedDataset {
  /** The path the dataset was loaded from, as given. */
  path: string
  /** sha256 of the file bytes, hex. Images referenced by path are hashed with the request stream. */
  sha256: string
  rows: ResolvedRow[]
}

/** One OpenAI chat content part of a user message. */
export type UserContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

function fail(path: string, line: number | null, message: string): never {
  throw new ServegateError('FILE_INVALID', line === null ? `${path}: ${message}` : `${path}:${line}: ${message}`)
}

function fieldName(issuePath: readonly PropertyKey[]): string {
  let name = ''
  for (const key of issuePath) name += typeof key === 'number' ? `[${key}]` : name ? `.${String(key)}` : String(key)
  return name
}

function typeOf(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'number' && !Number.isFinite(value)) return 'a number out of range'
  return typeof value
}

function valueAt(object: unknown, issuePath: readonly PropertyKey[]): unknown {
  let value = object
  for (const key of issuePath) {
    if (value === null || typeof value !== 'object') return undefined
    value = (value as Record<PropertyKey, unknown>)[key]
  }
  return value
}

/** Turns the first zod issue of a line into "<what is wrong, naming the field>; <fix>". */
function describeIssue(issue: z.core.$ZodIssue, object: Record<string, unknown>): string {
  const field = fieldName(issue.path)
  const top = typeof issue.path[0] === 'string' ? issue.path[0] : ''
  const hint = FIELD_HINTS[top] ?? 'a valid value'
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? ''
    const owner = FIELD_SCORER[key]
    if (owner) {
      return `field \`${key}\` is not used by the ${String(object.scorer)} scorer; remove it, or set \`scorer\` to "${owner}"`
    }
    return `unknown field \`${key}\`; remove it or fix its spelling (fields: ${Object.keys(FIELD_HINTS).join(', ')})`
  }
  if (issue.code === 'custom') {
    return issue.message.startsWith('field `') ? issue.message : `field \`${field}\` ${issue.message}`
  }
  const value = valueAt(object, issue.path)
  if (issue.path.length === 1 && value === undefined) return `missing field \`${field}\`; add it: ${hint}`
  if (issue.code === 'invalid_type' || issue.code === 'invalid_union') {
    const expected = object.scorer === 'numeric' && top === 'answer' ? 'a finite number, e.g. 42 (not "42")' : hint
    return `field \`${field}\` has the wrong type (${typeOf(value)}); set it to ${expected}`
  }
  if (issue.code === 'too_small') {
    const what =
      issue.origin === 'string'
        ? 'is empty'
        : issue.origin === 'array'
          ? `has fewer than ${String(issue.minimum)} items`
          : `is below ${String(issue.minimum)}`
    return `field \`${field}\` ${what}; set it to ${hint}`
  }
  return `field \`${field}\` ${issue.message.replace(/^Invalid input: /, '').toLowerCase()}; set it to ${hint}`
}

function parseLine(source: string, path: string, line: number): ParsedRow {
  let value: unknown
  try {
    value = JSON.parse(source)
  } catch (error) {
    fail(path, line, `not valid JSON (${(error as Error).message}); write one JSON object per line, without trailing commas or comments`)
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    fail(
      path,
      line,
      `is ${typeOf(value)}, not a JSON object; write one object per line, e.g. {"prompt":"…","answer":42,"scorer":"numeric"}`,
    )
  }
  const object = value as Record<string, unknown>
  if (object.scorer === undefined) fail(path, line, `missing field \`scorer\`; add it: ${FIELD_HINTS.scorer}`)
  if (typeof object.scorer !== 'string' || !(SCORERS as readonly string[]).includes(object.scorer)) {
    fail(path, line, `field \`scorer\` is ${JSON.stringify(object.scorer)}; set it to ${FIELD_HINTS.scorer}`)
  }
  const parsed = DatasetRow.safeParse(object)
  if (!parsed.success) {
    // A misspelt field also shows up as a missing one; naming the unknown key is the better fix.
    const issues = parsed.error.issues
    const issue = issues.find((i) => i.code === 'unrecognized_keys') ?? (issues[0] as z.core.$ZodIssue)
    fail(path, line, describeIssue(issue, object))
  }
  return { ...parsed.data, id: parsed.data.id ?? `line-${line}`, line }
}

/**
 * Parses the text of a JSONL dataset: one row per line, blank lines skipped. Pure; image
 * references are kept as written (see `loadDataset`).
 * @param path used only in error messages
 * @throws ServegateError `FILE_INVALID` naming `<path>:<line>`, the field and the fix
 */
export function parseDataset(text: string, path: string): ParsedRow[] {
  const rows: ParsedRow[] = []
  const ids = new Map<string, number>()
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  for (let i = 0; i < lines.length; i++) {
    const source = lines[i] as string
    if (source.trim() === '') continue
    const row = parseLine(source, path, i + 1)
    const previous = ids.get(row.id)
    if (previous !== undefined) {
      fail(path, row.line, `field \`id\` "${row.id}" repeats the id of line ${previous}; make ids unique`)
    }
    ids.set(row.id, row.line)
    rows.push(row)
  }
  if (rows.length === 0) fail(path, null, 'the dataset has no rows; add one JSON object per line')
  return rows
}

/** The image types a dataset may reference; others are refused (engines differ in what they accept). */
export type ImageMimeType = 'image/png' | 'image/jpeg' | 'image/webp' | 'image/gif'

/**
 * The image type of some bytes by their magic number, or null.
 * @example imageMimeType(readFileSync('chart.png')) // 'image/png'
 */
export function imageMimeType(bytes: Uint8Array): ImageMimeType | null {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    return 'image/png'
  }
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg'
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP') {
    return 'image/webp'
  }
  if (b.length >= 6 && /^GIF8[79]a$/.test(b.toString('latin1', 0, 6))) return 'image/gif'
  return null
}

function describeBytes(bytes: Uint8Array): string {
  return bytes.length === 0
    ? 'is empty'
    : `starts with ${Buffer.from(bytes.subarray(0, 8))
        .toString('hex')
        .replace(/(..)(?!$)/g, '$1 ')}`
}

const DATA_URI = /^data:([^;,]+);base64,([A-Za-z0-9+/]*={0,2})$/

function resolveDataUri(uri: string, path: string, line: number, field: string): string {
  const match = DATA_URI.exec(uri)
  if (!match) {
    fail(
      path,
      line,
      `field \`${field}\` is a data URI that is not data:image/<type>;base64,<data>; encode the image as base64 or reference a file`,
    )
  }
  const declared = match[1] as string
  const detected = imageMimeType(Buffer.from(match[2] as string, 'base64'))
  if (detected === null) {
    fail(path, line, `field \`${field}\` does not hold a PNG, JPEG, WebP or GIF image; embed one of those types`)
  }
  if (declared !== detected) {
    fail(path, line, `field \`${field}\` declares ${declared} but holds ${detected}; declare ${detected}`)
  }
  return uri
}

/**
 * Why a file could not be read, in a few words: the system code, and for a missing file where a
 * relative path was looked for.
 * @example readFailure('data/qa.jsonl', enoent) // 'ENOENT: no such file /repo/data/qa.jsonl'
 */
export function readFailure(path: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOENT') return `ENOENT: no such file ${resolve(path)}`
  if (code === 'EISDIR') return 'EISDIR: it is a directory'
  return code ?? (error as Error).message
}

function unreadable(path: string, error: unknown): ServegateError {
  return new ServegateError('FILE_INVALID', `${path}: cannot read the dataset (${readFailure(path, error)}); check the path`, {
    cause: error,
  })
}

/** The bytes of a dataset file, or FILE_INVALID naming the path. */
async function readDatasetBytes(path: string): Promise<Buffer> {
  try {
    return await readFile(path)
  } catch (error) {
    throw unreadable(path, error)
  }
}

/**
 * Reads a JSONL dataset for its reference answers only: every row checked, images left as
 * written (not read), and the sha256 of the file bytes, the same hash a run record keeps.
 * @throws ServegateError `FILE_INVALID` for an unreadable file or a bad row, naming `<path>:<line>`
 * @example const { rows, sha256 } = await readDatasetAnswers('fixtures/datasets/arithmetic.jsonl')
 */
export async function readDatasetAnswers(path: string): Promise<{ rows: ParsedRow[]; sha256: string }> {
  const bytes = await readDatasetBytes(path)
  return { rows: parseDataset(bytes.toString('utf8'), path), sha256: createHash('sha256').update(bytes).digest('hex') }
}

/**
 * A row judged by another scorer (`servegate rescore --scorer`): its id, prompt, images and answer
 * kept, the fields only its own scorer used dropped, the new scorer's defaults filled. For
 * `numeric` an answer written as a string of a number ("42") is read as that number; for `choice`
 * a string answer is upper-cased. `regex` needs a `pattern` that rows of other scorers lack.
 * @param path used only in error messages
 * @throws ServegateError `FILE_INVALID` naming `<path>:<line>`, the field and the fix when the row cannot be judged so
 * @example
 * const row = { id: 'add-01', line: 1, prompt: 'What is 16 + 28?', images: [], scorer: 'exact', answer: '44' }
 * withScorer(row, 'numeric', 'd.jsonl') // { id: 'add-01', line: 1, prompt: 'What is 16 + 28?', images: [], scorer: 'numeric', answer: 44 }
 */
export function withScorer(row: ParsedRow, scorer: Scorer, path: string): ParsedRow {
  if (row.scorer === scorer) return row
  if (scorer === 'regex') {
    fail(
      path,
      row.line,
      `--scorer regex needs field \`pattern\`, which rows of the ${row.scorer} scorer lack; ` +
        'set `scorer` to "regex" and add `pattern` on the rows in the file instead of passing --scorer regex',
    )
  }
  let answer: unknown = row.answer
  if (scorer === 'numeric' && typeof answer === 'string' && answer.trim() !== '' && Number.isFinite(Number(answer.trim()))) {
    answer = Number(answer.trim())
  }
  if (scorer === 'choice' && typeof answer === 'string') answer = answer.trim().toUpperCase()
  const object: Record<string, unknown> = { id: row.id, prompt: row.prompt, images: row.images, scorer, answer }
  const parsed = DatasetRow.safeParse(object)
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue
    fail(path, row.line, `with --scorer ${scorer}, ${describeIssue(issue, object)}; or drop --scorer`)
  }
  return { ...parsed.data, id: row.id, line: row.line }
}

/** The image files a dataset's rows reference by path, absolute (data URIs need no read). */
function imageFiles(rows: readonly ParsedRow[], path: string): string[] {
  const base = dirname(path)
  return [...new Set(rows.flatMap((row) => row.images.filter((ref) => !ref.startsWith('data:')).map((ref) => resolve(base, ref))))]
}

/**
 * Resolves every row's images to data URIs from the image files already read (each file's bytes,
 * or why it could not be read), checking each: pure, so the sync and async loaders share it.
 */
function resolveImages(rows: ParsedRow[], path: string, images: ReadonlyMap<string, Buffer | Error>): void {
  const base = dirname(path)
  for (const row of rows) {
    row.images = row.images.map((ref, index) => {
      const field = `images[${index}]`
      if (ref.startsWith('data:')) return resolveDataUri(ref, path, row.line, field)
      const image = images.get(resolve(base, ref)) as Buffer | Error
      if (image instanceof Error) {
        fail(
          path,
          row.line,
          `field \`${field}\` "${ref}" cannot be read (${readFailure(resolve(base, ref), image)}); give a path relative to the dataset file`,
        )
      }
      const mime = imageMimeType(image)
      if (mime === null) {
        fail(
          path,
          row.line,
          `field \`${field}\` "${ref}" is not a PNG, JPEG, WebP or GIF image (it ${describeBytes(image)}); reference an image file`,
        )
      }
      return `data:${mime};base64,${image.toString('base64')}`
    })
  }
}

/**
 * Reads a JSONL dataset, checks every row and resolves its images to data URIs (the mime
 * type comes from the bytes, not the file name).
 * @throws ServegateError `FILE_INVALID` for an unreadable file, a bad row or a bad image,
 *   naming `<path>:<line>` and the field
 * @example const { rows, sha256 } = await loadDataset('fixtures/datasets/charts.jsonl')
 */
export async function loadDataset(path: string): Promise<LoadedDataset> {
  const bytes = await readDatasetBytes(path)
  const rows = parseDataset(bytes.toString('utf8'), path)
  const files = imageFiles(rows, path)
  const read = await Promise.all(files.map((file) => readFile(file).catch((error: unknown) => error as Error)))
  resolveImages(rows, path, new Map(files.map((file, i) => [file, read[i] as Buffer | Error])))
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), rows }
}

/**
 * {@link loadDataset} without waiting: what a declaration reads (`cell()` and `pair()` return at
 * once), the same checks and the same result.
 * @throws ServegateError `FILE_INVALID`, as `loadDataset`
 */
export function loadDatasetSync(path: string): LoadedDataset {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (error) {
    throw unreadable(path, error)
  }
  const rows = parseDataset(bytes.toString('utf8'), path)
  const images = new Map<string, Buffer | Error>()
  for (const file of imageFiles(rows, path)) {
    try {
      images.set(file, readFileSync(file))
    } catch (error) {
      images.set(file, error as Error)
    }
  }
  resolveImages(rows, path, images)
  return { path, sha256: createHash('sha256').update(bytes).digest('hex'), rows }
}

/**
 * The OpenAI chat `content` of the user message for a row: the prompt string when the row
 * has no images; otherwise the image parts (data URIs, in order) followed by the text part,
 * the order vision models expect for chart questions.
 * @example datasetUserContent(row) // [{ type: 'image_url', image_url: { url: 'data:image/png;base64,…' } }, { type: 'text', text: 'Which
 * bar…' }]
 */
export function datasetUserContent(row: Pick<ResolvedRow, 'prompt' | 'images'>): string | UserContentPart[] {
  if (row.images.length === 0) return row.prompt
  return [...row.images.map((url): UserContentPart => ({ type: 'image_url', image_url: { url } })), { type: 'text', text: row.prompt }]
}
