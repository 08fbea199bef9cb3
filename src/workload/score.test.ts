import { describe, expect, test } from 'vitest'
import { DatasetRow } from './dataset.ts'
import { finalAnswerSegment, findChoice, findNumbers, normalizeExact, scoreResponse, stripReasoning } from './score.ts'

const row = (fields: Record<string, unknown>): DatasetRow => DatasetRow.parse({ prompt: 'q', ...fields })
const numeric = (answer: number, extra: Record<string, unknown> = {}) => row({ scorer: 'numeric', answer, ...extra })
const choice = (answer: string, choices?: string[]) => row({ scorer: 'choice', answer, ...(choices ? { choices } : {}) })
const exact = (answer: string | number) => row({ scorer: 'exact', answer })
const regex = (pattern: string, flags?: string) => row({ scorer: 'regex', answer: 'x', pattern, ...(flags ? { flags } : {}) })

describe('stripReasoning', () => {
  test.each([
    ['<think>41? no, 40</think>42', '42'],
    ['<THINK>a</THINK> 42 <think>b</think>', '42'],
    ['first thought\nmore</think>\nAnswer: 42', 'Answer: 42'],
    ['<think>still thinking about 41', ''],
    ['  <think>\n41', ''],
    ['42 <think>trailing unterminated', '42'],
    ['no reasoning at all', 'no reasoning at all'],
  ])('%j → %j', (content, expected) => {
    expect(stripReasoning(content)).toBe(expected)
  })
})

describe('finalAnswerSegment', () => {
  test.each([
    ['Answer: 42', '42'],
    ['answer:42', '42'],
    ['Final answer: Paris.', 'Paris.'],
    ['FINAL ANSWER:  (C)', '(C)'],
    ['**Final Answer:** 42', '42'],
    ['**Answer**: C', 'C'],
    ['Answer:\n\n42', '42'],
    ['Answer: 3\nLater, I reconsidered.\nAnswer: 4 apples', '4 apples'],
    ['Answer: 3\n\\boxed{4}', '4'],
    ['\\boxed{4}\nAnswer: 3', '3'],
    ['$\\boxed{\\frac{1}{2}}$', '\\frac{1}{2}'],
    ['Answer: ', null],
    ['Answers: many', null],
    ['The answer is 42', null],
    ['no marker here', null],
    ['\\boxed{unterminated', null],
  ])('%j → %j', (text, expected) => {
    expect(finalAnswerSegment(text)).toBe(expected)
  })
})

describe('findNumbers', () => {
  const values = (text: string) => findNumbers(text).map((n) => n.value)
  test.each([
    ['1,234.5', [1234.5]],
    ['The answer is 1,024', [1024]],
    ['-3 and − 4 and −5', [-3, 4, -5]],
    ['x=-3', [-3]],
    ['pages 10-20', [10, 20]],
    ['42%', [42]],
    ['3.0e2', [300]],
    ['1E-3', [0.001]],
    ['42.', [42]],
    ['.5 and 0.25', [0.5, 0.25]],
    ['$1,234,567.89 total', [1234567.89]],
    ['1,2,3', [1, 2, 3]],
    ['version 1.2.3', [1.2]],
    ['COVID19 cases: 7', [7]],
    ['４２', [42]],
    ['no digits here', []],
  ])('%j → %j', (text, expected) => {
    expect(values(text)).toEqual(expected)
  })
})

describe('normalizeExact', () => {
  test.each([
    ['  “Paris.” ', 'paris'],
    ['**Paris**', 'paris'],
    ['New   York\nCity', 'new york city'],
    ['(odd)', 'odd'],
    ['ﬁne', 'fine'],
    ['ＡＢＣ', 'abc'],
    ['-3', '-3'],
    ['75%', '75%'],
    ['Done!', 'done'],
  ])('%j → %j', (text, expected) => {
    expect(normalizeExact(text)).toBe(expected)
  })
})

describe('findChoice', () => {
  const ABCD = ['A', 'B', 'C', 'D']
  test.each([
    ['B', 'B'],
    ['b', 'B'],
    ['(b)', 'B'],
    ['**C**', 'C'],
    ['B.', 'B'],
    ['The tallest bar is C.', 'C'],
    ['Looking at (A) and (B), the answer is (D)', 'D'],
    ['The answer is B, since A is shorter.', 'B'],
    ['the correct option is: c', 'C'],
    ['the answer is b.', 'B'],
    ['the answer is a bit unclear, but D', 'D'],
    ['C) is my pick', 'C'],
    ['Option E is not listed; I pick A', 'A'],
    ["I'd say it's", null],
    ['none of them', null],
  ])('%j → %j', (text, expected) => {
    expect(findChoice(text, ABCD)).toBe(expected)
  })

  test('first: takes the first letter of a final-answer segment', () => {
    expect(findChoice('C, because A is shorter', ABCD, true)).toBe('C')
    expect(findChoice('C, because A is shorter', ABCD)).toBe('A')
  })

  test('only the allowed letters count', () => {
    expect(findChoice('E', ABCD)).toBeNull()
    expect(findChoice('X or Y', ['X', 'Y'])).toBe('Y')
  })
})

describe('scoreResponse: numeric', () => {
  test('a number inside <think> is ignored', () => {
    expect(scoreResponse(numeric(42), '<think>17 + 25 is maybe 41, or 43?</think>42')).toEqual({
      correct: true,
      extracted: '42',
      reason: 'extracted 42, expected 42 ± 0',
    })
  })

  test('a stray </think> ends the reasoning; an unterminated <think> leaves nothing', () => {
    expect(scoreResponse(numeric(42), 'so 41 + 1</think>The result is 42.').correct).toBe(true)
    expect(scoreResponse(numeric(42), '<think>it is 42 I think')).toEqual({
      correct: false,
      extracted: null,
      reason: 'empty response (after removing <think> reasoning)',
    })
  })

  test.each([
    ['42', 42, true, '42'],
    ['42.', 42, true, '42'],
    ['The answer is 1,024', 1024, true, '1024'],
    ['17 + 25 = 42', 42, true, '42'],
    ['It is -3.', -3, true, '-3'],
    ['−48', -48, true, '-48'],
    ['About 42%', 42, true, '42'],
    ['3.0e2', 300, true, '300'],
    ['Answer: 42 (since 40 + 2)', 42, true, '42'],
    ['Final answer: \\boxed{1,024}', 1024, true, '1024'],
    ['**Answer:** 41', 42, false, '41'],
    ['I got 41', 42, false, '41'],
    ['0.1 + 0.2 = 0.3', 0.3, true, '0.3'],
  ])('%j vs %d → %s', (content, answer, correct, extracted) => {
    const result = scoreResponse(numeric(answer), content)
    expect([result.correct, result.extracted]).toEqual([correct, extracted])
  })

  test('says what it extracted and the band it allowed', () => {
    expect(scoreResponse(numeric(42), '41').reason).toBe('extracted 41, expected 42 ± 0')
    expect(scoreResponse(numeric(3.5, { tolerance: 0.5 }), 'about 4')).toEqual({
      correct: true,
      extracted: '4',
      reason: 'extracted 4, expected 3.5 ± 0.5',
    })
    expect(scoreResponse(numeric(3.5, { tolerance: 0.5 }), '4.1').correct).toBe(false)
    expect(scoreResponse(numeric(86400, { tolerancePct: 1 }), '86,000 seconds')).toEqual({
      correct: true,
      extracted: '86000',
      reason: 'extracted 86000, expected 86400 ± 1%',
    })
    expect(scoreResponse(numeric(86400, { tolerancePct: 1 }), '85,000').correct).toBe(false)
    expect(scoreResponse(numeric(-10, { tolerancePct: 10 }), '-9').correct).toBe(true)
  })

  test('no number, and no number after the marker', () => {
    expect(scoreResponse(numeric(42), 'forty-two')).toEqual({ correct: false, extracted: null, reason: 'no number found' })
    expect(scoreResponse(numeric(42), '42 apples.\nAnswer: forty-two')).toEqual({
      correct: false,
      extracted: null,
      reason: 'no number found after the final-answer marker ("forty-two")',
    })
  })
})

describe('scoreResponse: exact', () => {
  test.each([
    ['Paris', 'Paris', true],
    ['  paris. ', 'Paris', true],
    ['"Paris"', 'Paris', true],
    ['**Paris**', 'Paris', true],
    ['The capital is Paris.', 'Paris', false],
    ['Let me think.\nFinal answer: Paris', 'Paris', true],
    ['<think>London? No.</think>Paris', 'Paris', true],
    ['NINETEEN', 'nineteen', true],
    ['0.5', 0.5, true],
    ['Paris, France', 'Paris', false],
  ])('%j vs %j → %s', (content, answer, correct) => {
    expect(scoreResponse(exact(answer), content).correct).toBe(correct)
  })

  test('reports both normalized strings', () => {
    expect(scoreResponse(exact('Paris'), 'Lyon.')).toEqual({
      correct: false,
      extracted: 'lyon',
      reason: 'extracted "lyon", expected "paris"',
    })
  })
})

describe('scoreResponse: choice', () => {
  test.each([
    ['C', 'C', true],
    ['Answer: (C)', 'C', true],
    ['(B)', 'B', true],
    ['B.', 'B', true],
    ['B)', 'B', true],
    ['the answer is B', 'B', true],
    ['Bar C is the tallest.', 'C', true],
    ['<think>A? B? maybe D</think>C', 'C', true],
    ['Answer: C, because A is shorter', 'C', true],
    ['Final Answer: \\boxed{D}', 'D', true],
    ['A', 'C', false],
  ])('%j vs %s → %s', (content, answer, correct) => {
    expect(scoreResponse(choice(answer), content).correct).toBe(correct)
  })

  test('uses the row choices and says what it found', () => {
    const abc = choice('B', ['A', 'B', 'C'])
    expect(scoreResponse(abc, 'D')).toEqual({ correct: false, extracted: null, reason: 'no choice letter (A, B, C) found' })
    expect(scoreResponse(abc, 'C')).toEqual({ correct: false, extracted: 'C', reason: 'extracted C, expected B' })
    expect(scoreResponse(abc, 'Answer: none of them').reason).toBe('no choice letter (A, B, C) found after the final-answer marker')
  })
})

describe('scoreResponse: regex', () => {
  test('tests the pattern on the remaining text, or the final-answer segment', () => {
    expect(scoreResponse(regex('^\\W*M\\W*$'), 'M')).toEqual({ correct: true, extracted: 'M', reason: '/^\\W*M\\W*$/ matched "M"' })
    expect(scoreResponse(regex('^\\W*M\\W*$'), '<think>MM or M?</think> **M**').correct).toBe(true)
    expect(scoreResponse(regex('^\\W*M\\W*$'), 'It is M').correct).toBe(false)
    expect(scoreResponse(regex('^\\W*M\\W*$'), 'Roman numerals are letters.\nFinal answer: M').correct).toBe(true)
    expect(scoreResponse(regex('^\\W*M\\W*$'), 'MM')).toEqual({ correct: false, extracted: null, reason: '/^\\W*M\\W*$/ did not match' })
  })

  test('honours the flags', () => {
    expect(scoreResponse(regex('\\b75(\\.0+)?\\s*(%|percent)', 'i'), 'It is 75 Percent.')).toMatchObject({
      correct: true,
      extracted: '75 Percent',
    })
    expect(scoreResponse(regex('\\b75(\\.0+)?\\s*(%|percent)'), 'It is 75 Percent.').correct).toBe(false)
  })
})

test('an empty response is wrong for every scorer', () => {
  for (const r of [numeric(1), exact('x'), choice('A'), regex('.*')]) {
    expect(scoreResponse(r, '   ')).toEqual({
      correct: false,
      extracted: null,
      reason: 'empty response (after removing <think> reasoning)',
    })
  }
})
