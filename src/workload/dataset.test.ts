import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { ServegateError } from '../errors.ts'
import { datasetUserContent, imageMimeType, loadDataset, parseDataset, type ParsedRow, readDatasetAnswers, withScorer } from './dataset.ts'

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13])
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16])
const GIF = Buffer.from('GIF89a\x01\x00', 'latin1')
const WEBP = Buffer.from('RIFF\x24\x00\x00\x00WEBPVP8 ', 'latin1')

/** The FILE_INVALID message a parse throws, or a failure if it does not throw one. */
function parseError(text: string): string {
  try {
    parseDataset(text, 'q.jsonl')
  } catch (error) {
    expect(error).toBeInstanceOf(ServegateError)
    expect((error as ServegateError).code).toBe('FILE_INVALID')
    return (error as Error).message
  }
  throw new Error('expected parseDataset to throw')
}

const line = (row: Record<string, unknown>): string => JSON.stringify(row)
const numeric = { prompt: 'What is 17 + 25?', answer: 42, scorer: 'numeric' }

describe('parseDataset', () => {
  test('parses every scorer and fills the defaults once', () => {
    const rows = parseDataset(
      [
        line({ id: 'add-01', ...numeric }),
        '',
        line({ prompt: 'Capital of France?', answer: 'Paris', scorer: 'exact' }),
        line({ prompt: 'Which?', answer: 'B', scorer: 'choice' }),
        line({ prompt: 'Which?', answer: 'C', scorer: 'choice', choices: ['A', 'B', 'C'] }),
        line({ prompt: 'Roman 1000?', answer: 'M', scorer: 'regex', pattern: '^M$' }),
        line({ prompt: 'Chart?', answer: 3.5, scorer: 'numeric', tolerance: 0.5, images: ['charts/a.png'] }),
        line({ prompt: 'Big?', answer: 86400, scorer: 'numeric', tolerancePct: 1 }),
      ].join('\n'),
      'q.jsonl',
    )
    expect(rows.map((r) => [r.id, r.line])).toEqual([
      ['add-01', 1],
      ['line-3', 3],
      ['line-4', 4],
      ['line-5', 5],
      ['line-6', 6],
      ['line-7', 7],
      ['line-8', 8],
    ])
    expect(rows[0]).toEqual({ id: 'add-01', line: 1, prompt: 'What is 17 + 25?', answer: 42, scorer: 'numeric', images: [] })
    expect(rows[2]).toMatchObject({ scorer: 'choice', choices: ['A', 'B', 'C', 'D', 'E'] })
    expect(rows[3]).toMatchObject({ scorer: 'choice', choices: ['A', 'B', 'C'] })
    expect(rows[4]).toMatchObject({ scorer: 'regex', pattern: '^M$', flags: '' })
    expect(rows[5]).toMatchObject({ tolerance: 0.5, images: ['charts/a.png'] })
  })

  test('accepts CRLF line ends, a byte-order mark and whitespace-only lines', () => {
    const rows = parseDataset(`\uFEFF${line(numeric)}\r\n   \r\n${line(numeric)}\r\n`, 'q.jsonl')
    expect(rows.map((r) => r.id)).toEqual(['line-1', 'line-3'])
  })

  test.each([
    ['invalid JSON', `${line(numeric)}\n\n{"prompt": "x",}`, /^q\.jsonl:3: not valid JSON \(.+\); write one JSON object per line/],
    ['an array', '[1, 2]', /^q\.jsonl:1: is an array, not a JSON object; write one object per line/],
    ['a bare string', '"hello"', /^q\.jsonl:1: is string, not a JSON object/],
    [
      'no scorer',
      line({ prompt: 'p', answer: 1 }),
      /^q\.jsonl:1: missing field `scorer`; add it: one of "exact", "numeric", "choice", "regex"$/,
    ],
    ['an unknown scorer', line({ ...numeric, scorer: 'fuzzy' }), /^q\.jsonl:1: field `scorer` is "fuzzy"; set it to one of "exact"/],
    [
      'no prompt',
      line({ answer: 1, scorer: 'numeric' }),
      /^q\.jsonl:1: missing field `prompt`; add it: the question as a non-empty string$/,
    ],
    [
      'a numeric prompt',
      line({ ...numeric, prompt: 7 }),
      /^q\.jsonl:1: field `prompt` has the wrong type \(number\); set it to the question/,
    ],
    ['an empty prompt', line({ ...numeric, prompt: '' }), /^q\.jsonl:1: field `prompt` is empty; set it to the question/],
    ['no answer', line({ prompt: 'p', scorer: 'exact' }), /^q\.jsonl:1: missing field `answer`; add it: the reference answer/],
    [
      'a numeric answer given as a string',
      line({ ...numeric, answer: '42' }),
      /^q\.jsonl:1: field `answer` has the wrong type \(string\); set it to a finite number, e.g. 42 \(not "42"\)$/,
    ],
    [
      'a numeric answer out of range',
      '{"prompt":"p","answer":1e400,"scorer":"numeric"}',
      /^q\.jsonl:1: field `answer` has the wrong type \(a number out of range\); set it to a finite number/,
    ],
    [
      'a single choice',
      line({ prompt: 'p', answer: 'A', scorer: 'choice', choices: ['A'] }),
      /^q\.jsonl:1: field `choices` has fewer than 2 items; set it to an array of distinct/,
    ],
    [
      'a boolean exact answer',
      line({ prompt: 'p', answer: true, scorer: 'exact' }),
      /^q\.jsonl:1: field `answer` has the wrong type \(boolean\); set it to the reference answer, a string or a number$/,
    ],
    [
      'a negative tolerance',
      line({ ...numeric, tolerance: -1 }),
      /^q\.jsonl:1: field `tolerance` is below 0; set it to a non-negative absolute tolerance/,
    ],
    [
      'both tolerances',
      line({ ...numeric, tolerance: 1, tolerancePct: 5 }),
      /^q\.jsonl:1: field `tolerancePct` is set together with `tolerance`; keep only one of them$/,
    ],
    [
      'a tolerance on an exact row',
      line({ prompt: 'p', answer: 'x', scorer: 'exact', tolerance: 1 }),
      /^q\.jsonl:1: field `tolerance` is not used by the exact scorer; remove it, or set `scorer` to "numeric"$/,
    ],
    [
      'choices on a numeric row',
      line({ ...numeric, choices: ['A', 'B'] }),
      /^q\.jsonl:1: field `choices` is not used by the numeric scorer; remove it, or set `scorer` to "choice"$/,
    ],
    [
      'a misspelt field',
      line({ prompt: 'p', answr: 'x', scorer: 'exact' }),
      /^q\.jsonl:1: unknown field `answr`; remove it or fix its spelling \(fields: id, prompt, answer/,
    ],
    [
      'a choice answer outside the choices',
      line({ prompt: 'p', answer: 'E', scorer: 'choice', choices: ['A', 'B', 'C', 'D'] }),
      /^q\.jsonl:1: field `answer` "E" is not one of the choices A, B, C, D; set it to one of those letters/,
    ],
    [
      'a lowercase choice answer',
      line({ prompt: 'p', answer: 'b', scorer: 'choice' }),
      /^q\.jsonl:1: field `answer` "b" is not one of the choices A, B, C, D, E/,
    ],
    [
      'a choice that is not a letter',
      line({ prompt: 'p', answer: 'A', scorer: 'choice', choices: ['A', 'BB'] }),
      /^q\.jsonl:1: field `choices\[1\]` must be a single capital letter; set it to an array of distinct single capital letters/,
    ],
    [
      'a repeated choice',
      line({ prompt: 'p', answer: 'A', scorer: 'choice', choices: ['A', 'B', 'A'] }),
      /^q\.jsonl:1: field `choices` lists "A" twice; list each letter once$/,
    ],
    [
      'a regex row without a pattern',
      line({ prompt: 'p', answer: 'M', scorer: 'regex' }),
      /^q\.jsonl:1: missing field `pattern`; add it: a JavaScript regular expression/,
    ],
    [
      'an invalid pattern',
      line({ prompt: 'p', answer: 'M', scorer: 'regex', pattern: '(' }),
      /^q\.jsonl:1: field `pattern` is not a valid regular expression \(.+\); fix it/,
    ],
    [
      'an unsupported flag',
      line({ prompt: 'p', answer: 'M', scorer: 'regex', pattern: 'M', flags: 'g' }),
      /^q\.jsonl:1: field `flags` may only contain i, m, s, u; set it to regular expression flags/,
    ],
    [
      'images that are not an array',
      line({ ...numeric, images: 'a.png' }),
      /^q\.jsonl:1: field `images` has the wrong type \(string\); set it to an array of image paths/,
    ],
    [
      'an image URL',
      line({ ...numeric, images: ['a.png', 'https://example.com/b.png'] }),
      /^q\.jsonl:1: field `images\[1\]` is a URL \(https:\/\/example\.com\/b\.png\); download the image/,
    ],
    [
      'an absolute image path',
      line({ ...numeric, images: ['/tmp/a.png'] }),
      /^q\.jsonl:1: field `images\[0\]` is an absolute path \(\/tmp\/a\.png\); use a path relative to the dataset file$/,
    ],
    ['an empty id', line({ ...numeric, id: '' }), /^q\.jsonl:1: field `id` is empty; set it to a non-empty string unique in the file/],
  ])('refuses %s, naming the line and the field', (_name, text, message) => {
    expect(parseError(text)).toMatch(message)
  })

  test('refuses a repeated id, naming both lines (defaulted ids included)', () => {
    expect(parseError([line({ id: 'a', ...numeric }), line({ id: 'b', ...numeric }), line({ id: 'a', ...numeric })].join('\n'))).toBe(
      'q.jsonl:3: field `id` "a" repeats the id of line 1; make ids unique',
    )
    expect(parseError([line(numeric), line({ id: 'line-1', ...numeric })].join('\n'))).toBe(
      'q.jsonl:2: field `id` "line-1" repeats the id of line 1; make ids unique',
    )
  })

  test('refuses an empty dataset', () => {
    expect(parseError('')).toBe('q.jsonl: the dataset has no rows; add one JSON object per line')
    expect(parseError('\n  \n\r\n')).toBe('q.jsonl: the dataset has no rows; add one JSON object per line')
  })

  test('the committed fixtures parse', async () => {
    for (const name of ['arithmetic.jsonl', 'charts.jsonl']) {
      const path = join(import.meta.dirname, '../../fixtures/datasets', name)
      const rows = parseDataset(await readFile(path, 'utf8'), path)
      expect(new Set(rows.map((r) => r.scorer))).toEqual(new Set(['exact', 'numeric', 'choice', 'regex']))
    }
  })
})

describe('imageMimeType', () => {
  test('detects by magic bytes, not by name', () => {
    expect(imageMimeType(PNG)).toBe('image/png')
    expect(imageMimeType(JPEG)).toBe('image/jpeg')
    expect(imageMimeType(GIF)).toBe('image/gif')
    expect(imageMimeType(WEBP)).toBe('image/webp')
    expect(imageMimeType(Buffer.from('RIFF\x24\x00\x00\x00WAVE', 'latin1'))).toBeNull()
    expect(imageMimeType(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeNull()
    expect(imageMimeType(new Uint8Array(0))).toBeNull()
    expect(imageMimeType(PNG.subarray(0, 7))).toBeNull()
  })
})

describe('loadDataset', () => {
  let dir: string
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'servegate-dataset-'))
    await writeFile(join(dir, 'chart.png'), PNG)
    await writeFile(join(dir, 'photo.JPG'), JPEG)
    await writeFile(join(dir, 'anim.gif'), GIF)
    await writeFile(join(dir, 'still.bin'), WEBP)
    await writeFile(join(dir, 'notes.png'), 'not an image')
    await writeFile(join(dir, 'empty.png'), '')
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  async function load(rows: Array<Record<string, unknown>>): Promise<Awaited<ReturnType<typeof loadDataset>>> {
    const path = join(dir, 'q.jsonl')
    await writeFile(path, rows.map(line).join('\n'))
    return loadDataset(path)
  }

  async function loadError(rows: Array<Record<string, unknown>>): Promise<string> {
    const error = await load(rows).then(
      () => new Error('expected loadDataset to throw'),
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ServegateError)
    expect((error as ServegateError).code).toBe('FILE_INVALID')
    return (error as Error).message
  }

  test('resolves image paths relative to the file into data URIs typed by their bytes', async () => {
    const dataset = await load([
      numeric,
      { ...numeric, images: ['chart.png', 'photo.JPG', './anim.gif', 'still.bin'] },
      { ...numeric, images: ['chart.png'] },
    ])
    expect(dataset.rows[0]?.images).toEqual([])
    expect(dataset.rows[1]?.images).toEqual([
      `data:image/png;base64,${PNG.toString('base64')}`,
      `data:image/jpeg;base64,${JPEG.toString('base64')}`,
      `data:image/gif;base64,${GIF.toString('base64')}`,
      `data:image/webp;base64,${WEBP.toString('base64')}`,
    ])
    expect(dataset.rows[2]?.images).toEqual([`data:image/png;base64,${PNG.toString('base64')}`])
  })

  test('records the path and the sha256 of the file bytes', async () => {
    const dataset = await load([numeric])
    const bytes = await readFile(join(dir, 'q.jsonl'))
    expect(dataset.path).toBe(join(dir, 'q.jsonl'))
    expect(dataset.sha256).toBe(createHash('sha256').update(bytes).digest('hex'))
    expect(dataset.sha256).toMatch(/^[0-9a-f]{64}$/)
  })

  test('keeps a well-formed data URI as it is', async () => {
    const uri = `data:image/png;base64,${PNG.toString('base64')}`
    expect((await load([{ ...numeric, images: [uri] }])).rows[0]?.images).toEqual([uri])
  })

  test('refuses a missing image, naming the line, the field and the path', async () => {
    const message = await loadError([numeric, { ...numeric, images: ['chart.png', 'missing.png'] }])
    expect(message).toMatch(
      /q\.jsonl:2: field `images\[1\]` "missing\.png" cannot be read \(ENOENT.*\); give a path relative to the dataset file$/,
    )
  })

  test('refuses a file that is not an image, showing its first bytes', async () => {
    expect(await loadError([{ ...numeric, images: ['notes.png'] }])).toMatch(
      new RegExp(
        /q\.jsonl:1: field `images\[0\]` "notes\.png" is not a PNG, JPEG, WebP or GIF image /.source +
          /\(it starts with 6e 6f 74 20 61 6e 20 69\); reference an image file$/.source,
      ),
    )
    expect(await loadError([{ ...numeric, images: ['empty.png'] }])).toMatch(
      /"empty\.png" is not a PNG, JPEG, WebP or GIF image \(it is empty\)/,
    )
  })

  test('refuses a directory given as an image', async () => {
    expect(await loadError([{ ...numeric, images: ['.'] }])).toMatch(/q\.jsonl:1: field `images\[0\]` "\." cannot be read \(EISDIR/)
  })

  test('refuses a malformed data URI, a non-image one and a mislabelled one', async () => {
    expect(await loadError([{ ...numeric, images: ['data:image/png,rawbytes'] }])).toMatch(
      /q\.jsonl:1: field `images\[0\]` is a data URI that is not data:image\/<type>;base64,<data>/,
    )
    expect(await loadError([{ ...numeric, images: [`data:image/png;base64,${Buffer.from('hello').toString('base64')}`] }])).toMatch(
      /field `images\[0\]` does not hold a PNG, JPEG, WebP or GIF image/,
    )
    expect(await loadError([{ ...numeric, images: [`data:image/png;base64,${JPEG.toString('base64')}`] }])).toMatch(
      /field `images\[0\]` declares image\/png but holds image\/jpeg; declare image\/jpeg$/,
    )
  })

  test('refuses a dataset file that cannot be read', async () => {
    const error = await loadDataset(join(dir, 'nope.jsonl')).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ServegateError)
    expect((error as ServegateError).code).toBe('FILE_INVALID')
    expect((error as Error).message).toMatch(/nope\.jsonl: cannot read the dataset \(ENOENT.*\); check the path$/)
  })

  test('loads the committed chart fixtures with PNG data URIs', async () => {
    const dataset = await loadDataset(join(import.meta.dirname, '../../fixtures/datasets/charts.jsonl'))
    expect(dataset.rows.length).toBeGreaterThan(0)
    for (const row of dataset.rows) {
      expect(row.images.length).toBeGreaterThan(0)
      for (const url of row.images) expect(url).toMatch(/^data:image\/png;base64,iVBORw0KGgo/)
    }
  })
})

describe('datasetUserContent', () => {
  test('is the prompt string when there are no images', () => {
    expect(datasetUserContent({ prompt: 'What is 2 + 2?', images: [] })).toBe('What is 2 + 2?')
  })

  test('puts the image parts first, in order, then the text', () => {
    expect(
      datasetUserContent({ prompt: 'Which bar is tallest?', images: ['data:image/png;base64,AAA', 'data:image/gif;base64,BBB'] }),
    ).toEqual([
      { type: 'image_url', image_url: { url: 'data:image/png;base64,AAA' } },
      { type: 'image_url', image_url: { url: 'data:image/gif;base64,BBB' } },
      { type: 'text', text: 'Which bar is tallest?' },
    ])
  })

  test('serializes to the OpenAI chat shape', () => {
    const content = datasetUserContent({ prompt: 'Q', images: ['data:image/png;base64,AAA'] })
    expect(JSON.stringify({ role: 'user', content })).toBe(
      '{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}},{"type":"text","text":"Q"}]}',
    )
  })
})

describe('readDatasetAnswers', () => {
  test('the rows and the hash of the file bytes, without reading images', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'servegate-answers-'))
    try {
      const file = join(dir, 'qa.jsonl')
      const text = '{"prompt":"Which bar is tallest?","answer":"B","scorer":"choice","images":["charts/missing.png"]}\n'
      await writeFile(file, text)
      const { rows, sha256 } = await readDatasetAnswers(file)
      expect(rows).toMatchObject([{ id: 'line-1', answer: 'B', images: ['charts/missing.png'] }])
      expect(sha256).toBe(createHash('sha256').update(text).digest('hex'))
      await expect(readDatasetAnswers(join(dir, 'none.jsonl'))).rejects.toThrow(/none\.jsonl: cannot read the dataset .*; check the path$/)
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('withScorer', () => {
  const [exact, choice, numeric] = parseDataset(
    '{"id":"e","prompt":"p","answer":"1,024","scorer":"exact"}\n' +
      '{"id":"c","prompt":"p","answer":"B","scorer":"choice","choices":["A","B"]}\n' +
      '{"id":"n","prompt":"p","answer":44,"scorer":"numeric","tolerance":1}\n' +
      '{"id":"w","prompt":"p","answer":"Paris","scorer":"exact"}\n',
    'q.jsonl',
  ) as [ParsedRow, ParsedRow, ParsedRow]

  test("keeps the id, prompt and answer, drops the old scorer's fields, fills the new one's defaults", () => {
    expect(withScorer(numeric, 'exact', 'q.jsonl')).toEqual({ id: 'n', line: 3, prompt: 'p', images: [], scorer: 'exact', answer: 44 })
    expect(withScorer(choice, 'exact', 'q.jsonl')).toEqual({ id: 'c', line: 2, prompt: 'p', images: [], scorer: 'exact', answer: 'B' })
    expect(withScorer(numeric, 'numeric', 'q.jsonl')).toBe(numeric)
  })

  test('a numeric answer written as a string is read as the number; one that is no number is refused, naming the line', () => {
    expect(() => withScorer(exact, 'numeric', 'q.jsonl')).toThrow(
      /^q\.jsonl:1: with --scorer numeric, field `answer` has the wrong type \(string\); set it to a finite number/,
    )
    const plain = parseDataset('{"id":"s","prompt":"p","answer":" 12.5 ","scorer":"exact"}', 'q.jsonl')[0] as ParsedRow
    expect(withScorer(plain, 'numeric', 'q.jsonl')).toMatchObject({ scorer: 'numeric', answer: 12.5 })
  })

  test('choice takes a letter answer, upper-cased, with the default letters; regex needs a pattern no other row has', () => {
    const letter = parseDataset('{"id":"l","prompt":"p","answer":"b","scorer":"exact"}', 'q.jsonl')[0] as ParsedRow
    expect(withScorer(letter, 'choice', 'q.jsonl')).toMatchObject({ scorer: 'choice', answer: 'B', choices: ['A', 'B', 'C', 'D', 'E'] })
    expect(() => withScorer(numeric, 'choice', 'q.jsonl')).toThrow(/^q\.jsonl:3: with --scorer choice, field `answer`/)
    expect(() => withScorer(exact, 'regex', 'q.jsonl')).toThrow(
      /^q\.jsonl:1: --scorer regex needs field `pattern`, which rows of the exact scorer lack/,
    )
  })
})
