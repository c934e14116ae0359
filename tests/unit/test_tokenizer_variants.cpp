// Component variants of the test tokenizers of tests/data/ (Metaspace, Split behaviors, added-token
// flags, normalizers...), each checked against ids and decodes that Hugging Face tokenizers 0.23.3
// made. The expectations below were written by a script run against HF tokenizers; a variant is a
// test tokenizer.json with "patch" applied to its top-level keys and "added" appended to its
// added_tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

const char* kVariants = R"JSON(
[
 {"name": "SpmMetaspaceFirst", "base": "llama-spm",
  "patch": {"normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false}, "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15043, 3186], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [263, 529, 13168, 29958, 289, 29871, 529, 13168, 29958, 29883], "decoded": "a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [6635, 3022, 271, 6635, 29889, 903, 4117, 6635, 29896, 313, 4117, 29897, 6635, 29918], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [921, 518, 29934, 29962, 259, 343, 29961, 29934, 29962, 13, 29920], "decoded": "x [R]   y[R]<0x0A>z"},
   {"text": "<mask>x <mask>xy", "ids": [529, 13168, 29958, 29916, 529, 13168, 29958, 3594], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [29871, 29896, 29906, 633, 370, 29871, 29941, 29946, 29945, 29871, 921], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [29871, 15043, 29871, 2787, 259], "decoded": " Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [3067, 3217, 1307, 29871, 242, 191, 164, 242, 191, 165, 242, 191, 166, 29871, 31017, 22667, 29871, 30291, 30292, 30291], "decoded": "\u00c9COLE <0xEF><0xBC><0xA1><0xEF><0xBC><0xA2><0xEF><0xBC><0xA3> \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [25638, 370, 633, 29871, 29955, 370, 633, 7776, 274], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [3275, 322, 29871, 3765, 29871, 8162], "decoded": "lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [29871], "decoded": ""},
   {"text": "a\tb\n\nc\u3000d", "ids": [263, 12, 29890, 13, 13, 29883, 30358, 29881], "decoded": "a<0x09>b<0x0A><0x0A>c\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [1, 29916, 2, 29871, 0], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SpmMetaspaceLegacySplit", "base": "llama-spm",
  "patch": {"normalizer": null, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true}, "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15043, 3186], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [263, 529, 13168, 29958, 289, 29871, 529, 13168, 29958, 29883], "decoded": "a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [6635, 3022, 271, 6635, 29889, 903, 4117, 6635, 29896, 313, 4117, 29897, 6635, 29918], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [921, 518, 29934, 29962, 29871, 29871, 343, 29961, 29934, 29962, 13, 29920], "decoded": "x [R]   y[R]<0x0A>z"},
   {"text": "<mask>x <mask>xy", "ids": [529, 13168, 29958, 29916, 529, 13168, 29958, 3594], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [29871, 29896, 29906, 633, 370, 29871, 29941, 29946, 29945, 29871, 921], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [29871, 15043, 29871, 2787, 29871, 29871], "decoded": " Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [3067, 3217, 1307, 29871, 242, 191, 164, 242, 191, 165, 242, 191, 166, 29871, 31017, 22667, 29871, 30291, 30292, 30291], "decoded": "\u00c9COLE <0xEF><0xBC><0xA1><0xEF><0xBC><0xA2><0xEF><0xBC><0xA3> \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [25638, 370, 633, 29871, 29955, 370, 633, 7776, 274], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [3275, 322, 29871, 3765, 29871, 8162], "decoded": "lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [29871], "decoded": ""},
   {"text": "a\tb\n\nc\u3000d", "ids": [263, 12, 29890, 13, 13, 29883, 30358, 29881], "decoded": "a<0x09>b<0x0A><0x0A>c\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [1, 921, 2, 29871, 0], "decoded": "<s> x</s> <unk>"}
  ]},
 {"name": "AddedTokenFlags", "base": "gpt-2",
  "patch": {},
  "added": [{"id": 50257, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true}, {"id": 50258, "content": "cat", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false}, {"id": 50259, "content": "[R]", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": false}, {"id": 50260, "content": "<mask>x", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false}],
  "cases": [
   {"text": "Hello world", "ids": [15496, 995], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [257, 50257, 275, 50257, 66], "decoded": " a<mask> b<mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1673, 265, 220, 9246, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 220, 50258, 88, 50258, 89], "decoded": "x [R]y[R]z"},
   {"text": "<mask>x <mask>xy", "ids": [50259, 220, 50259, 88], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 450, 397, 39937, 220, 2124], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 18435, 220, 2159, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 27332, 120, 94, 171, 120, 95, 171, 120, 96, 27332, 105, 223, 15195, 39683, 68, 7377, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 450, 767, 397, 450, 16212, 269], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 198, 198, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SpmNormalizedAddedToken", "base": "llama-spm",
  "patch": {},
  "added": [{"id": 32000, "content": "ab c", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}],
  "cases": [
   {"text": "Hello world", "ids": [15043, 3186], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [29871, 263, 529, 13168, 29958, 289, 29871, 529, 13168, 29958, 29883], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [6635, 3022, 271, 6635, 29889, 903, 4117, 6635, 29896, 313, 4117, 29897, 6635, 29918], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [921, 518, 29934, 29962, 259, 343, 29961, 29934, 29962, 13, 29920], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [529, 13168, 29958, 29916, 529, 13168, 29958, 3594], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [29871, 29896, 29906, 633, 370, 29871, 29941, 29946, 29945, 29871, 921], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [259, 15043, 29871, 2787, 259], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [3067, 3217, 1307, 29871, 242, 191, 164, 242, 191, 165, 242, 191, 166, 29871, 31017, 22667, 29871, 30291, 30292, 30291], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [25638, 370, 633, 29871, 29955, 370, 32000, 370, 274], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [29871, 3275, 322, 29871, 3765, 29871, 8162], "decoded": " lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [259], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [263, 12, 29890, 13, 13, 29883, 30358, 29881], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [1, 921, 2, 259, 0], "decoded": "<s> x</s>  <unk>"}
  ]},
 {"name": "SplitRemoved", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 6894], "decoded": "Helloworld"},
   {"text": " a <mask> b  <mask>c", "ids": [64, 27, 27932, 29, 65, 27, 27932, 29, 66], "decoded": "a<mask>b<mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1102, 9246, 9246, 13, 62, 9246, 9246, 7, 9246, 8, 9246, 62], "decoded": "catconcatcat._catcat(cat)cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 58, 49, 60, 88, 58, 49, 60, 198, 89], "decoded": "x[R]y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 27, 27932, 29, 5431], "decoded": "<mask>x<mask>xy"},
   {"text": "12 abab 345  x", "ids": [397, 397, 87], "decoded": "ababx"},
   {"text": "  Hello  World  ", "ids": [15496, 10603], "decoded": "HelloWorld"},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 171, 120, 94, 171, 120, 95, 171, 120, 96, 171, 105, 223, 41347, 39683, 68, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE\uff21\uff22\uff23\ufb01Stra\u00dfe\u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 397, 397, 397, 66, 397, 66], "decoded": "abcababababcabc"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 392, 23352, 2777, 2114], "decoded": "\u2581leadanddoublespaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [], "decoded": ""},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 27, 2954, 29], "decoded": "<s>x</s><unk>"}
  ]},
 {"name": "SplitRemovedInverted", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "Removed", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [220], "decoded": " "},
   {"text": " a <mask> b  <mask>c", "ids": [220, 220, 220, 220, 220], "decoded": "     "},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [220, 220, 220, 220, 16, 220, 220], "decoded": "    1  "},
   {"text": "x [R]   y[R]\nz", "ids": [220, 220, 220, 220], "decoded": "    "},
   {"text": "<mask>x <mask>xy", "ids": [220], "decoded": " "},
   {"text": "12 abab 345  x", "ids": [16, 17, 220, 220, 18, 19, 20, 220, 220], "decoded": "12  345  "},
   {"text": "  Hello  World  ", "ids": [220, 220, 220, 220, 220, 220], "decoded": "      "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [220, 220, 220, 220], "decoded": "    "},
   {"text": "abcab ab 7ab ab cab c", "ids": [220, 220, 22, 220, 220, 220], "decoded": "  7   "},
   {"text": "\u2581lead and  double  spaces", "ids": [220, 220, 220, 220, 220], "decoded": "     "},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [], "decoded": ""},
   {"text": "<s>x</s> <unk>", "ids": [220], "decoded": " "}
  ]},
 {"name": "SplitMergedWithPrevious", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "MergedWithPrevious", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 220, 6894], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [220, 64, 220, 27, 27932, 29, 220, 65, 220, 220, 27, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 220, 1102, 9246, 220, 9246, 13, 220, 62, 9246, 220, 9246, 16, 220, 7, 9246, 8, 220, 9246, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 220, 58, 49, 60, 220, 220, 220, 88, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 220, 27, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [16, 17, 220, 397, 397, 220, 18, 19, 20, 220, 220, 87], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 220, 15496, 220, 220, 10603, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 220, 171, 120, 94, 171, 120, 95, 171, 120, 96, 220, 171, 105, 223, 220, 41347, 39683, 68, 220, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 220, 397, 220, 22, 397, 220, 397, 220, 66, 397, 220, 66], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 220, 392, 220, 220, 23352, 220, 220, 2777, 2114], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 220, 27, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitMergedWithPreviousInverted", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "MergedWithPrevious", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 995], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [257, 1279, 27932, 29, 275, 220, 1279, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1673, 265, 3797, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 685, 49, 60, 220, 220, 331, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 1279, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [16, 17, 450, 397, 220, 18, 19, 20, 220, 2124], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 18435, 220, 2159, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 27332, 120, 94, 171, 120, 95, 171, 120, 96, 27332, 105, 223, 15195, 39683, 68, 7377, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 450, 220, 22, 397, 450, 16212, 269], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitMergedWithNext", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "MergedWithNext", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 995], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [257, 1279, 27932, 29, 275, 220, 1279, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1673, 265, 3797, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 685, 49, 60, 220, 220, 331, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 1279, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [16, 17, 450, 397, 220, 18, 19, 20, 220, 2124], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 18435, 220, 2159, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 27332, 120, 94, 171, 120, 95, 171, 120, 96, 27332, 105, 223, 15195, 39683, 68, 7377, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 450, 220, 22, 397, 450, 16212, 269], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitMergedWithNextInverted", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "MergedWithNext", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 220, 6894], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [220, 64, 220, 27, 27932, 29, 220, 65, 220, 220, 27, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 220, 1102, 9246, 220, 9246, 13, 220, 62, 9246, 220, 9246, 16, 220, 7, 9246, 8, 220, 9246, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 220, 58, 49, 60, 220, 220, 220, 88, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 220, 27, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [16, 17, 220, 397, 397, 220, 18, 19, 20, 220, 220, 87], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 220, 15496, 220, 220, 10603, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 220, 171, 120, 94, 171, 120, 95, 171, 120, 96, 220, 171, 105, 223, 220, 41347, 39683, 68, 220, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 220, 397, 220, 22, 397, 220, 397, 220, 66, 397, 220, 66], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 220, 392, 220, 220, 23352, 220, 220, 2777, 2114], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 220, 27, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitContiguous", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "Contiguous", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 220, 6894], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [220, 64, 220, 27, 27932, 29, 220, 65, 220, 220, 27, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 220, 1102, 9246, 220, 9246, 13, 220, 62, 9246, 220, 9246, 16, 220, 7, 9246, 8, 220, 9246, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 220, 58, 49, 60, 220, 220, 220, 88, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 220, 27, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 220, 397, 397, 39937, 220, 220, 87], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 220, 15496, 220, 220, 10603, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 220, 171, 120, 94, 171, 120, 95, 171, 120, 96, 220, 171, 105, 223, 220, 41347, 39683, 68, 220, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 220, 397, 767, 397, 220, 397, 220, 66, 397, 220, 66], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 220, 392, 220, 220, 23352, 220, 220, 2777, 2114], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 220, 27, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitContiguousInverted", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}| "}, "behavior": "Contiguous", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 220, 6894], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [220, 64, 220, 27, 27932, 29, 220, 65, 220, 220, 27, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 220, 1102, 9246, 220, 9246, 13, 220, 62, 9246, 220, 9246, 16, 220, 7, 9246, 8, 220, 9246, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 220, 58, 49, 60, 220, 220, 220, 88, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 220, 27, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 220, 397, 397, 39937, 220, 220, 87], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 220, 15496, 220, 220, 10603, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 220, 171, 120, 94, 171, 120, 95, 171, 120, 96, 220, 171, 105, 223, 220, 41347, 39683, 68, 220, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 220, 397, 767, 397, 220, 397, 220, 66, 397, 220, 66], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 220, 392, 220, 220, 23352, 220, 220, 2777, 2114], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 220, 27, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "SplitStringThenByteLevelPrefixSpace", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": "ab"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [18435, 995], "decoded": " Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [257, 1279, 27932, 29, 275, 220, 1279, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [3797, 1673, 265, 3797, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": " cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [2124, 685, 49, 60, 220, 220, 331, 58, 49, 60, 198, 89], "decoded": " x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [1279, 27932, 29, 87, 1279, 27932, 29, 5431], "decoded": " <mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1105, 220, 450, 450, 39937, 220, 2124], "decoded": " 12  ab ab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 18435, 220, 2159, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [43052, 8220, 2538, 27332, 120, 94, 171, 120, 95, 171, 120, 96, 27332, 105, 223, 15195, 39683, 68, 7377, 96, 138, 239, 138, 96], "decoded": " \u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [450, 269, 450, 220, 450, 767, 450, 220, 450, 269, 450, 269], "decoded": " ab c ab  ab 7 ab  ab c ab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [11019, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": " \u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [257, 197, 65, 198, 198, 66, 5099, 222, 67], "decoded": " a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [1279, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": " <s>x</s> <unk>"}
  ]},
 {"name": "DigitsContiguous", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 995], "decoded": "Hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [257, 1279, 27932, 29, 275, 220, 1279, 27932, 29, 66], "decoded": " a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1673, 265, 3797, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 685, 49, 60, 220, 220, 331, 58, 49, 60, 198, 89], "decoded": "x [R]   y[R]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 1279, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 450, 397, 220, 27712, 220, 2124], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [220, 18435, 220, 2159, 220, 220], "decoded": "  Hello  World  "},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 27332, 120, 94, 171, 120, 95, 171, 120, 96, 27332, 105, 223, 15195, 39683, 68, 7377, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 450, 220, 22, 397, 450, 16212, 269], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [220], "decoded": " "},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 628, 66, 5099, 222, 67], "decoded": "a\tb\n\nc\u3000d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "NfkcLowercaseStrip", "base": "gpt-2",
  "patch": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": true, "strip_right": true}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [31373, 995], "decoded": "hello world"},
   {"text": " a <mask> b  <mask>c", "ids": [64, 1279, 27932, 29, 275, 220, 1279, 27932, 29, 66], "decoded": "a <mask> b  <mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1673, 265, 3797, 13, 4808, 9246, 3797, 16, 357, 9246, 8, 3797, 62], "decoded": "cat concat cat. _cat cat1 (cat) cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 685, 81, 60, 220, 220, 331, 58, 81, 60, 198, 89], "decoded": "x [r]   y[r]\nz"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 1279, 27932, 29, 5431], "decoded": "<mask>x <mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 450, 397, 39937, 220, 2124], "decoded": "12 abab 345  x"},
   {"text": "  Hello  World  ", "ids": [31373, 220, 995], "decoded": "hello  world"},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [2634, 1073, 293, 450, 66, 25912, 3534, 39683, 68, 18074, 225, 17394, 38392], "decoded": "\u00e9cole abc fi stra\u00dfe \u03c3\u03b1\u03c3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 450, 767, 397, 450, 16212, 269], "decoded": "abcab ab 7ab ab cab c"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 290, 220, 4274, 220, 9029], "decoded": "\u2581lead and  double  spaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [], "decoded": ""},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 197, 65, 198, 198, 66, 288], "decoded": "a\tb\n\nc d"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 1279, 2954, 29], "decoded": "<s>x</s> <unk>"}
  ]},
 {"name": "WhitespaceSplit", "base": "gpt-2",
  "patch": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}},
  "added": [],
  "cases": [
   {"text": "Hello world", "ids": [15496, 6894], "decoded": "Helloworld"},
   {"text": " a <mask> b  <mask>c", "ids": [64, 27, 27932, 29, 65, 27, 27932, 29, 66], "decoded": "a<mask>b<mask>c"},
   {"text": "cat concat cat. _cat cat1 (cat) cat_", "ids": [9246, 1102, 9246, 9246, 13, 62, 9246, 9246, 16, 7, 9246, 8, 9246, 62], "decoded": "catconcatcat._catcat1(cat)cat_"},
   {"text": "x [R]   y[R]\nz", "ids": [87, 58, 49, 60, 88, 58, 49, 60, 89], "decoded": "x[R]y[R]z"},
   {"text": "<mask>x <mask>xy", "ids": [27, 27932, 29, 87, 27, 27932, 29, 5431], "decoded": "<mask>x<mask>xy"},
   {"text": "12 abab 345  x", "ids": [1065, 397, 397, 27712, 87], "decoded": "12abab345x"},
   {"text": "  Hello  World  ", "ids": [15496, 10603], "decoded": "HelloWorld"},
   {"text": "\u00c9COLE \uff21\uff22\uff23 \ufb01 Stra\u00dfe \u03a3\u0391\u03a3", "ids": [38351, 8220, 2538, 171, 120, 94, 171, 120, 95, 171, 120, 96, 171, 105, 223, 41347, 39683, 68, 138, 96, 138, 239, 138, 96], "decoded": "\u00c9COLE\uff21\uff22\uff23\ufb01Stra\u00dfe\u03a3\u0391\u03a3"},
   {"text": "abcab ab 7ab ab cab c", "ids": [39305, 397, 397, 22, 397, 397, 66, 397, 66], "decoded": "abcabab7ababcabc"},
   {"text": "\u2581lead and  double  spaces", "ids": [5008, 223, 28230, 392, 23352, 2777, 2114], "decoded": "\u2581leadanddoublespaces"},
   {"text": "", "ids": [], "decoded": ""},
   {"text": " ", "ids": [], "decoded": ""},
   {"text": "a\tb\n\nc\u3000d", "ids": [64, 65, 66, 67], "decoded": "abcd"},
   {"text": "<s>x</s> <unk>", "ids": [27, 82, 29, 87, 3556, 82, 29, 27, 2954, 29], "decoded": "<s>x</s><unk>"}
  ]}
]
)JSON";

class TokenizerVariant : public ::testing::TestWithParam<std::string> {};

nlohmann::json variant(const std::string& name) {
  for (const auto& v : nlohmann::json::parse(kVariants))
    if (v["name"] == name) return v;
  return {};
}

TEST_P(TokenizerVariant, MatchesHuggingFace) {
  const auto v = variant(GetParam());
  ASSERT_FALSE(v.is_null());
  const auto file = test::tokenizers_dir() / v["base"].get<std::string>() / "tokenizer.json";
  if (!std::filesystem::exists(file)) GTEST_FAIL() << file << " is missing from the clone";
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  for (auto it = v["patch"].begin(); it != v["patch"].end(); ++it) j[it.key()] = it.value();
  for (const auto& a : v["added"]) j["added_tokens"].push_back(a);
  const auto tok = Tokenizer::from_json_text(j.dump(), GetParam());
  for (const auto& c : v["cases"]) {
    const std::string text = c["text"];
    const auto ids = tok->encode(text, false);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << "text: \"" << text << "\"";
    EXPECT_EQ(tok->decode(c["ids"].get<std::vector<int32_t>>(), false), c["decoded"].get<std::string>())
        << "text: \"" << text << "\"";
  }
}

std::vector<std::string> variant_names() {
  std::vector<std::string> out;
  for (const auto& v : nlohmann::json::parse(kVariants)) out.push_back(v["name"]);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Hf, TokenizerVariant, ::testing::ValuesIn(variant_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tpbatch
