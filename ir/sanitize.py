"""The one gate between text from users or files and GLSL.

Node names, name scopes and source locations are copied into shader comments, and a
few user-chosen words (a program's input and uniform names) become GLSL identifiers.
A newline in a comment ends it, and what follows is compiled: a graph file holding the
name "a\\n#define exp(x) 42.0" would change what every exp computes. So:

- names and scopes are validated where they are made (Graph.add_node, name_scope) and
  where they are read (load_graph): `check_name`, `check_scope`;
- source locations come from file names nobody validated: `clean_source` replaces
  what could not be shown safely;
- everything written into a shader comment passes `comment`, which leaves printable
  ASCII except the characters that could end or extend a comment (newline, CR, other
  control characters, backslash line continuations, `*/`), and percent-encodes those;
- identifiers taken from users pass `identifier`;
- `check_shader` re-reads a rendered shader: nothing but '#version' may be a
  preprocessor line, and no comment may hold a control character or a backslash.

The codegen layer uses `comment` through the Jinja filter of the same name.
"""
from __future__ import annotations

import re

from .errors import GraphError

MAX_NAME_LENGTH = 1000          # a node name (scopes included); TF has no limit, GL none
MAX_SOURCE_LENGTH = 1000        # a 'file:line' string
MAX_COMMENT_LENGTH = 4000       # one comment line in a shader (longer text is cut)

# One path segment of a name: TensorFlow's name characters, minus ':' (it separates the
# output index, as in 'split:1').
_SEGMENT = r"[A-Za-z0-9_.\-]+"
NAME_RE = re.compile(rf"^{_SEGMENT}(/{_SEGMENT})*$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# What a comment may hold unchanged: printable ASCII except '\' and '%' (the escape).
_COMMENT_UNSAFE = re.compile(r"[^\x20-\x24\x26-\x5b\x5d-\x7e]")
_SOURCE_UNSAFE = re.compile(r"[^\x20-\x7e]")
_SHADER_UNSAFE = re.compile(r"[^\t\x20-\x7e]")

# GLSL 4.60's keywords and reserved words an identifier may not be (330 reserves most).
GLSL_RESERVED = frozenset("""
attribute const uniform varying buffer shared coherent volatile restrict readonly
writeonly atomic_uint layout centroid flat smooth noperspective patch sample break
continue do for while switch case default if else subroutine in out inout float double
int void bool true false invariant precise discard return mat2 mat3 mat4 dmat2 dmat3
dmat4 mat2x2 mat2x3 mat2x4 dmat2x2 dmat2x3 dmat2x4 mat3x2 mat3x3 mat3x4 dmat3x2 dmat3x3
dmat3x4 mat4x2 mat4x3 mat4x4 dmat4x2 dmat4x3 dmat4x4 vec2 vec3 vec4 ivec2 ivec3 ivec4
bvec2 bvec3 bvec4 dvec2 dvec3 dvec4 uint uvec2 uvec3 uvec4 lowp mediump highp precision
sampler1D sampler2D sampler3D samplerCube sampler1DShadow sampler2DShadow
samplerCubeShadow sampler1DArray sampler2DArray sampler1DArrayShadow
sampler2DArrayShadow isampler1D isampler2D isampler3D isamplerCube isampler1DArray
isampler2DArray usampler1D usampler2D usampler3D usamplerCube usampler1DArray
usampler2DArray sampler2DRect sampler2DRectShadow isampler2DRect usampler2DRect
samplerBuffer isamplerBuffer usamplerBuffer sampler2DMS isampler2DMS usampler2DMS
sampler2DMSArray isampler2DMSArray usampler2DMSArray struct common partition active asm
class union enum typedef template this resource goto inline noinline public static
extern external interface long short half fixed unsigned superp input output hvec2
hvec3 hvec4 fvec2 fvec3 fvec4 sampler3DRect filter sizeof cast namespace using main
""".split())


class InvalidNameError(GraphError, ValueError):
    """A node name, name scope or identifier with characters fragflow does not allow."""


def check_name(name, what: str = "node name") -> str:
    """name, if it is a valid node name ('dense/matmul_1'); else InvalidNameError."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} must be a string, not {type(name).__name__} "
                               f"({_shown(name)})")
    if len(name) > MAX_NAME_LENGTH or not NAME_RE.match(name):
        raise InvalidNameError(
            f"invalid {what} {_shown(name)}: use letters, digits, '_', '.', '-', with '/' "
            f"between scopes (at most {MAX_NAME_LENGTH} characters)")
    return name


def check_scope(scope, what: str = "name scope") -> str:
    """scope, if it is '' or a valid name ('block1/conv'); else InvalidNameError."""
    if scope == "":
        return scope
    return check_name(scope, what)


def clean_source(source) -> str:
    """A 'file:line' string safe to show anywhere: non-printable characters become '?'."""
    text = _SOURCE_UNSAFE.sub("?", str(source))
    return text if len(text) <= MAX_SOURCE_LENGTH else text[:MAX_SOURCE_LENGTH - 3] + "..."


def check_source(source, what: str = "source location") -> str:
    """source, if it is a printable one-line string (how load_graph reads files)."""
    if not isinstance(source, str) or len(source) > MAX_SOURCE_LENGTH \
            or _SOURCE_UNSAFE.search(source):
        raise InvalidNameError(f"invalid {what} {_shown(source)}: a printable one-line "
                               f"string of at most {MAX_SOURCE_LENGTH} characters")
    return source


def comment(text) -> str:
    """text made safe to follow '//' on one line of GLSL.

    Printable ASCII stays; everything else, and '\\' (a line continuation in GLSL 4.2+)
    and '%' (the escape character), becomes %XX of its UTF-8 bytes. '*/' is broken up
    so the text could even sit in a block comment. Long text is cut."""
    text = str(text)
    if len(text) > MAX_COMMENT_LENGTH:
        text = text[:MAX_COMMENT_LENGTH] + "..."
    text = _COMMENT_UNSAFE.sub(
        lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "replace")), text)
    return text.replace("*/", "*%2F")


def identifier(name, what: str = "identifier") -> str:
    """name, if it may be used as a GLSL identifier; else InvalidNameError."""
    if not isinstance(name, str) or not IDENTIFIER_RE.match(name) or len(name) > 64 \
            or name in GLSL_RESERVED or name.startswith(("gl_", "ff_")) or "__" in name:
        raise InvalidNameError(
            f"{what} {_shown(name)} is not usable in GLSL: letters, digits and '_', not "
            f"starting with a digit, 'gl_' or 'ff_', no '__', not a GLSL keyword, at most "
            f"64 characters")
    return name


class UnsafeShaderError(GraphError):
    """A rendered shader holds text no template writes: a sanitiser was bypassed."""


_COMMENT_START = re.compile(r"//(.*)$")


def check_shader(source: str, user_lines: range = range(0)) -> str:
    """source, after checking that nothing from outside slipped into it.

    user_lines: the (1-based) lines of GLSL a user wrote on purpose (ff.gpgpu_program),
    which are not checked."""
    if not user_lines and _clean_shader(source):
        return source             # the loop below would find nothing: it says what's wrong
    for number, line in enumerate(source.split("\n"), 1):
        if number in user_lines:
            continue
        if _SHADER_UNSAFE.search(line):
            raise UnsafeShaderError(f"generated shader line {number} holds a control or "
                                    f"non-ASCII character: {_shown(line)}")
        if line.lstrip().startswith("#") and not (number == 1 and
                                                  line.startswith("#version ")):
            raise UnsafeShaderError(f"generated shader line {number} is a preprocessor "
                                    f"directive no template writes: {_shown(line)}")
        found = _COMMENT_START.search(line)
        if found and ("\\" in found.group(1) or "*/" in found.group(1)):
            raise UnsafeShaderError(f"generated shader line {number} has a comment that "
                                    f"could reach the next line: {_shown(line)}")
    return source


# check_shader's three rules over the whole text at once (what a compile or a plan
# cache load mostly meets: clean shaders; line by line cost ~0.3 ms a kernel)
_SHADER_UNSAFE_ANYWHERE = re.compile(r"[^\t\n\x20-\x7e]")
_DIRECTIVE_AFTER_FIRST_LINE = re.compile(r"\n[ \t]*#")
_COMMENT_CONTINUED = re.compile(r"//[^\n]*(?:\\|\*/)")


def _clean_shader(source: str) -> bool:
    first = source.split("\n", 1)[0]
    return not (_SHADER_UNSAFE_ANYWHERE.search(source)
                or _DIRECTIVE_AFTER_FIRST_LINE.search(source)
                or first.lstrip().startswith("#") and not first.startswith("#version ")
                or _COMMENT_CONTINUED.search(source))


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
