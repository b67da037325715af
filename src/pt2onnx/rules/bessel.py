"""Bessel functions, the modified Bessel functions and the Airy function Ai.

torch's CPU kernels (ATen/native/Math.h) evaluate Cephes' Chebyshev series and rational
approximations; these rules evaluate the same published coefficients, with the same
branch points and the same polynomials as torch evaluates them, in float64 inside the
graph, and round once to the output dtype. onnxruntime has float64 Exp, Log, Sqrt, Sin
and Cos, so nothing runs in float32 on the way. Edge values follow torch: y0, y1, k0
and k1 are -inf / +inf at 0 and NaN below it; Ai is NaN at +-inf; i0 and i1 overflow
where torch's float32 ``exp(|x|)`` does. docs/ops.md states the measured accuracy.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from pt2onnx.rule_api import RuleContext, translation
from pt2onnx.rules._common import aten

F64 = ir.DataType.DOUBLE

# -- coefficients (Cephes i0.c, i1.c, k0.c, k1.c, j0.c, j1.c, airy.c, as torch uses them) --

# Chebyshev series, highest order first: exp(-x) I0(x) on [0, 8] in t = x/2 - 2, and
# exp(-x) sqrt(x) I0(x) on (8, inf) in t = 32/x - 2.
_I0_A = [
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06, -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03, -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01, -3.04682672343198398683e-01, 6.76795274409476084995e-01,
]
_I0_B = [
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-09, 2.26666899049817806459e-08, 2.04891858946906374183e-07,
    2.89137052083475648297e-06, 6.88975834691682398426e-05, 3.36911647825569408990e-03,
    8.04490411014108831608e-01,
]
# The same for I1: exp(-x) I1(x) / x on [0, 8], exp(-x) sqrt(x) I1(x) on (8, inf).
_I1_A = [
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-09,
    9.38153738649577178388e-09, -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06, -1.32731636560394358279e-05,
    4.78156510755005422638e-05, -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03, -1.05640848946261981558e-02,
    2.47264490306265168283e-02, -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01,
]
_I1_B = [
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01,
]
# K0(x) + log(x/2) I0(x) on [0, 2] in t = x^2 - 2; exp(x) sqrt(x) K0(x) on (2, inf) in
# t = 8/x - 2.
_K0_A = [
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01,
]
_K0_B = [
    5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
    6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
    1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
    2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
    2.44030308206595545468e00,
]
# x (K1(x) - log(x/2) I1(x)) on [0, 2]; exp(x) sqrt(x) K1(x) on (2, inf).
_K1_A = [
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e00,
]
_K1_B = [
    -5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
    1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
    3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
    2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
    1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e00,
]
# Rational approximations, highest power first. For x > 5 both J0 and Y0 use the
# modulus P = PP/PQ and phase Q = QP/QQ in w = 25/x^2; for x <= 5, J0 is
# (z - r1)(z - r2) RP/RQ in z = x^2, and Y0 - (2/pi) log(x) J0 is YP/YQ.
_J0_PP = [
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e00,
    5.44725003058768775090e00, 8.74716500199817011941e00, 5.30324038235394892183e00,
    9.99999999999999997821e-01,
]
_J0_PQ = [
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e00,
    5.47097740330417105182e00, 8.76190883237069594232e00, 5.30605288235394617618e00,
    1.00000000000000000218e00,
]
_J0_QP = [
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00,
]
_J0_QQ = [
    6.43178256118178023184e01, 8.56430025976980587198e02, 3.88240183605401609683e03,
    7.24046774195652478189e03, 5.93072701187316984827e03, 2.06209331660327847417e03,
    2.42005740240291393179e02,
]
_J0_RP = [
    -4.79443220978201773821e+09, 1.95617491946556577543e12, -2.49248344360967716204e+14,
    9.70862251047306323952e15,
]
_J0_RQ = [
    4.99563147152651017219e02, 1.73785401676374683123e05, 4.84409658339962045305e07,
    1.11855537045356834862e10, 2.11277520115489217587e12, 3.10518229857422583814e14,
    3.18121955943204943306e16, 1.71086294081043136091e18,
]
_Y0_YP = [
    1.55924367855235737965e04, -1.46639295903971606143e+07, 5.43526477051876500413e09,
    -9.82136065717911466409e+11, 8.75906394395366999549e13, -3.46628303384729719441e+15,
    4.42733268572569800351e16, -1.84950800436986690637e+16,
]
_Y0_YQ = [
    1.04128353664259848412e03, 6.26107330137134956842e05, 2.68919633393814121987e08,
    8.64002487103935000337e10, 2.02979612750105546709e13, 3.17157752842975028269e15,
    2.50596256172653059228e17,
]
# The same for J1 and Y1: J1 = x (z - r1)(z - r2) RP/RQ, Y1 - (2/pi)(J1 log x - 1/x) = x YP/YQ.
_J1_PP = [
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e00,
    5.11207951146807644818e00, 8.42404590141772420927e00, 5.21451598682361504063e00,
    1.00000000000000000254e00,
]
_J1_PQ = [
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e00,
    5.07386386128601488557e00, 8.39985554327604159757e00, 5.20982848682361821619e00,
    9.99999999999999997461e-01,
]
_J1_QP = [
    5.10862594750176621635e-02, 4.98213872951233449420e00, 7.58238284132545283818e01,
    3.66779609360150777800e02, 7.10856304998926107277e02, 5.97489612400613639965e02,
    2.11688757100572135698e02, 2.52070205858023719784e01,
]
_J1_QQ = [
    7.42373277035675149943e01, 1.05644886038262816351e03, 4.98641058337653607651e03,
    9.56231892404756170795e03, 7.99704160447350683650e03, 2.82619278517639096600e03,
    3.36093607810698293419e02,
]
_J1_RP = [
    -8.99971225705559398224e+08, 4.52228297998194034323e11, -7.27494245221818276015e+13,
    3.68295732863852883286e15,
]
_J1_RQ = [
    6.20836478118054335476e02, 2.56987256757748830383e05, 8.35146791431949253037e07,
    2.21511595479792499675e10, 4.74914122079991414898e12, 7.84369607876235854894e14,
    8.95222336184627338078e16, 5.32278620332680085395e18,
]
_Y1_YP = [
    1.26320474790178026440e09, -6.47355876379160291031e+11, 1.14509511541823727583e14,
    -8.12770255501325109621e+15, 2.02439475713594898196e17, -7.78877196265950026825e+17,
]
_Y1_YQ = [
    5.94301592346128195359e02, 2.35564092943068577943e05, 7.34811944459721705660e07,
    1.87601316108706159478e10, 3.88231277496238566008e12, 6.20557727146953693363e14,
    6.87141087355300489866e16, 3.97270608116560655612e18,
]
# Ai for x >= 2.09 (AN/AD in 1/zeta) and x < -2.09 (AFN/AFD, AGN/AGD in 1/zeta^2),
# zeta = 2/3 |x|^(3/2).
_AI_AN = [
    3.46538101525629032477e-01, 1.20075952739645805542e01, 7.62796053615234516538e01,
    1.68089224934630576269e02, 1.59756391350164413639e02, 7.05360906840444183113e01,
    1.40264691163389668864e01, 9.99999999999999995305e-01,
]
_AI_AD = [
    5.67594532638770212846e-01, 1.47562562584847203173e01, 8.45138970141474626562e01,
    1.77318088145400459522e02, 1.64234692871529701831e02, 7.14778400825575695274e01,
    1.40959135607834029598e01, 1.00000000000000000470e00,
]
_AI_AFN = [
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08,
]
_AI_AFD = [
    1.33560420706553243746e01, 3.26825032795224613948e01, 2.67367040941499554804e01,
    9.18707402907259625840e00, 1.47529146771666414581e00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07,
]
_AI_AGN = [
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10,
]
_AI_AGD = [
    9.30892908077441974853e00, 1.98352928718312140417e01, 1.55646628932864612953e01,
    5.47686069422975497931e00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09,
]

# Squares of the first two zeros of J0 and of J1.
_J0_ZEROS2 = (5.78318596294678452118e+00, 3.04712623436620863991e+01)
_J1_ZEROS2 = (1.46819706421238932572e+01, 4.92184563216946036703e+01)
_SQRT_2_OVER_PI = 0.797884560802865355879892119868763737
_TWO_OVER_PI = 0.636619772367581343075535053490057448
# Ai(0), -Ai'(0), 1/sqrt(pi)
_AI0, _AIP0 = 0.355028053887817239260, 0.258819403792806798405
_INV_SQRT_PI = 5.64189583547756286948e-01
# Maclaurin series of Ai's two solutions in z = x^3, Ai = Ai(0) f - |Ai'(0)| g:
# f = sum z^k / prod (3j-1)(3j), g = x sum z^k / prod (3j)(3j+1), j = 1..k. Terms to z^13 reach
# 1e-17 for |x| < 2.09, where torch uses the series.
_AI_TERMS = 13


def _airy_series(offset: int) -> list[float]:
    """1 / prod (3j + offset - 1)(3j + offset), j = 1..k, for k = 0..13, lowest first."""
    out = [1.0]
    for j in range(1, _AI_TERMS + 1):
        out.append(out[-1] / ((3 * j + offset - 1) * (3 * j + offset)))
    return out


_AI_F, _AI_G = _airy_series(0), _airy_series(1)
# The largest float32 x whose expf(x) is finite is just below this: where torch computes in
# float32 (float32, float16, bfloat16 outputs), i0 and i1 are inf from here on.
_F32_EXP_OVERFLOW = 88.72283935546875
_F32_MAX = 3.4028234663852886e38
_LOW_PRECISION = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


# -- graph helpers --------------------------------------------------------------------


def _c(g: RuleContext, value: float) -> ir.Value:
    return g.const(float(value), F64)


def _polevl(g: RuleContext, t: ir.Value, coeffs: list[float]) -> ir.Value:
    """Horner, highest power first: coeffs[0] t^n + ... + coeffs[n]."""
    acc = _c(g, coeffs[0])
    for c in coeffs[1:]:
        acc = g.op.Add(g.op.Mul(acc, t), _c(g, c))
    return acc


def _ratio(g: RuleContext, t: ir.Value, num: list[float], den: list[float]) -> ir.Value:
    return g.op.Div(_polevl(g, t, num), _polevl(g, t, den))


def _chbevl(g: RuleContext, t: ir.Value, coeffs: list[float]) -> ir.Value:
    """Clenshaw sum of coeffs[i] T_(n-1-i)(t/2), the zeroth term halved (Cephes chbevl)."""
    b0 = _c(g, coeffs[0])
    b1: ir.Value | None = None
    b2: ir.Value | None = None
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        tb = g.op.Mul(t, b1)
        b0 = g.op.Add(tb if b2 is None else g.op.Sub(tb, b2), _c(g, c))
    diff = b0 if b2 is None else g.op.Sub(b0, b2)
    return g.op.Mul(_c(g, 0.5), diff)


def _odd(g: RuleContext, x: ir.Value, value: ir.Value) -> ir.Value:
    """``value`` computed at |x|, negated where x < 0."""
    return g.op.Where(g.op.Less(x, _c(g, 0.0)), g.op.Neg(value), value)


def _out(g: RuleContext, value: ir.Value) -> ir.Value:
    return g.cast(value, g.dtype)


# -- modified Bessel functions of the first kind ------------------------------------------


def _i0e_abs(g: RuleContext, ax: ir.Value) -> ir.Value:
    """exp(-|x|) I0(|x|) from ax = |x|."""
    near = _chbevl(g, g.op.Sub(g.op.Mul(ax, _c(g, 0.5)), _c(g, 2.0)), _I0_A)
    far = g.op.Div(_chbevl(g, g.op.Sub(g.op.Div(_c(g, 32.0), ax), _c(g, 2.0)), _I0_B),
                   g.op.Sqrt(ax))
    return g.op.Where(g.op.LessOrEqual(ax, _c(g, 8.0)), near, far)


def _i1e_abs(g: RuleContext, ax: ir.Value) -> ir.Value:
    """exp(-|x|) I1(|x|) from ax = |x|."""
    near = g.op.Mul(_chbevl(g, g.op.Sub(g.op.Mul(ax, _c(g, 0.5)), _c(g, 2.0)), _I1_A), ax)
    far = g.op.Div(_chbevl(g, g.op.Sub(g.op.Div(_c(g, 32.0), ax), _c(g, 2.0)), _I1_B),
                   g.op.Sqrt(ax))
    return g.op.Where(g.op.LessOrEqual(ax, _c(g, 8.0)), near, far)


def _exp_as_torch(g: RuleContext, ax: ir.Value) -> ir.Value:
    """exp(|x|), inf where torch's own exp(|x|) overflows (it computes in float32 for
    float32, float16 and bfloat16 outputs; float64 overflows by itself)."""
    e = g.op.Exp(ax)
    if g.dtype in _LOW_PRECISION:
        e = g.op.Where(g.op.GreaterOrEqual(ax, _c(g, _F32_EXP_OVERFLOW)), _c(g, math.inf), e)
    return e


@translation([aten.i0.default, aten.special_modified_bessel_i0.default])
def i0(g: RuleContext, x: ir.Value) -> ir.Value:
    """i0(Tensor self) -> Tensor"""
    ax = g.op.Abs(g.cast(x, F64))
    return _out(g, g.op.Mul(_exp_as_torch(g, ax), _i0e_abs(g, ax)))


@translation(aten.special_i0e.default)
def i0e(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_i0e(Tensor self) -> Tensor"""
    return _out(g, _i0e_abs(g, g.op.Abs(g.cast(x, F64))))


@translation([aten.special_i1.default, aten.special_modified_bessel_i1.default])
def i1(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_i1(Tensor self) -> Tensor"""
    x64 = g.cast(x, F64)
    ax = g.op.Abs(x64)
    return _out(g, _odd(g, x64, g.op.Mul(_exp_as_torch(g, ax), _i1e_abs(g, ax))))


@translation(aten.special_i1e.default)
def i1e(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_i1e(Tensor self) -> Tensor"""
    x64 = g.cast(x, F64)
    return _out(g, _odd(g, x64, _i1e_abs(g, g.op.Abs(x64))))


# -- modified Bessel functions of the second kind -----------------------------------------


def _k(g: RuleContext, x: ir.Value, order: int, scaled: bool) -> ir.Value:
    """K0 / K1 (times exp(x) when ``scaled``): inf at 0, NaN below, like torch."""
    x64 = g.cast(x, F64)
    e_neg = g.op.Exp(g.op.Neg(x64))
    e_pos = g.op.Reciprocal(e_neg)  # exp(x), read only where x <= 2
    # x <= 2: K = series(x^2 - 2) -+ log(x/2) I(x), I(x) from I's [0, 8] series.
    log_half = g.op.Log(g.op.Mul(x64, _c(g, 0.5)))
    t_i = g.op.Sub(g.op.Mul(x64, _c(g, 0.5)), _c(g, 2.0))
    t_k = g.op.Sub(g.op.Mul(x64, x64), _c(g, 2.0))
    if order == 0:
        bessel_i = g.op.Mul(e_pos, _chbevl(g, t_i, _I0_A))
        near = g.op.Sub(_chbevl(g, t_k, _K0_A), g.op.Mul(log_half, bessel_i))
    else:
        bessel_i = g.op.Mul(g.op.Mul(e_pos, _chbevl(g, t_i, _I1_A)), x64)
        near = g.op.Add(g.op.Mul(log_half, bessel_i), g.op.Div(_chbevl(g, t_k, _K1_A), x64))
    # x > 2: exp(-x) series(8/x - 2) / sqrt(x).
    t_far = g.op.Sub(g.op.Div(_c(g, 8.0), x64), _c(g, 2.0))
    far = g.op.Div(_chbevl(g, t_far, _K0_B if order == 0 else _K1_B), g.op.Sqrt(x64))
    if scaled:
        near = g.op.Mul(near, e_pos)
    else:
        far = g.op.Mul(e_neg, far)
    out = g.op.Where(g.op.LessOrEqual(x64, _c(g, 2.0)), near, far)
    out = g.op.Where(g.op.Less(x64, _c(g, 0.0)), _c(g, math.nan), out)
    return _out(g, g.op.Where(g.op.Equal(x64, _c(g, 0.0)), _c(g, math.inf), out))


@translation(aten.special_modified_bessel_k0.default)
def modified_bessel_k0(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_modified_bessel_k0(Tensor self) -> Tensor"""
    return _k(g, x, 0, scaled=False)


@translation(aten.special_modified_bessel_k1.default)
def modified_bessel_k1(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_modified_bessel_k1(Tensor self) -> Tensor"""
    return _k(g, x, 1, scaled=False)


@translation(aten.special_scaled_modified_bessel_k0.default)
def scaled_modified_bessel_k0(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k0(Tensor x) -> Tensor"""
    return _k(g, x, 0, scaled=True)


@translation(aten.special_scaled_modified_bessel_k1.default)
def scaled_modified_bessel_k1(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_scaled_modified_bessel_k1(Tensor x) -> Tensor"""
    return _k(g, x, 1, scaled=True)


# -- Bessel functions of the first and second kind ----------------------------------------


def _hankel(g: RuleContext, ax: ir.Value, order: int, second_kind: bool) -> ir.Value:
    """J or Y of ``order`` for ax > 5: sqrt(2/(pi x)) (P cos(x - phi) - (5/x) Q sin(x - phi))
    (sin and cos swap roles for Y), phi = (2 order + 1) pi/4."""
    pp, pq, qp, qq = (_J0_PP, _J0_PQ, _J0_QP, _J0_QQ) if order == 0 else \
        (_J1_PP, _J1_PQ, _J1_QP, _J1_QQ)
    w = g.op.Div(_c(g, 25.0), g.op.Mul(ax, ax))
    p = _ratio(g, w, pp, pq)
    q = g.op.Mul(g.op.Div(_c(g, 5.0), ax), _ratio(g, w, qp, qq))
    phase = g.op.Sub(ax, _c(g, (2 * order + 1) * math.pi / 4))
    sin, cos = g.op.Sin(phase), g.op.Cos(phase)
    if second_kind:
        wave = g.op.Add(g.op.Mul(p, sin), g.op.Mul(q, cos))
    else:
        wave = g.op.Sub(g.op.Mul(p, cos), g.op.Mul(q, sin))
    return g.op.Div(g.op.Mul(wave, _c(g, _SQRT_2_OVER_PI)), g.op.Sqrt(ax))


def _j_near(g: RuleContext, ax: ir.Value, z: ir.Value, order: int) -> ir.Value:
    """J0 or J1 for |x| <= 5 (z = x^2), from ax = |x|."""
    rp, rq, (r1, r2) = (_J0_RP, _J0_RQ, _J0_ZEROS2) if order == 0 else \
        (_J1_RP, _J1_RQ, _J1_ZEROS2)
    out = g.op.Mul(g.op.Mul(g.op.Sub(z, _c(g, r1)), g.op.Sub(z, _c(g, r2))),
                   _ratio(g, z, rp, rq))
    return out if order == 0 else g.op.Mul(out, ax)


def _j(g: RuleContext, x: ir.Value, order: int) -> ir.Value:
    x64 = g.cast(x, F64)
    ax = g.op.Abs(x64)
    near = _j_near(g, ax, g.op.Mul(ax, ax), order)
    out = g.op.Where(g.op.LessOrEqual(ax, _c(g, 5.0)), near, _hankel(g, ax, order, False))
    return _out(g, out if order == 0 else _odd(g, x64, out))


def _y(g: RuleContext, x: ir.Value, order: int) -> ir.Value:
    """Y0 / Y1: -inf at 0 and NaN below, like torch."""
    x64 = g.cast(x, F64)
    z = g.op.Mul(x64, x64)
    log_term = g.op.Mul(_c(g, _TWO_OVER_PI), g.op.Log(x64))
    if order == 0:
        near = g.op.Add(_ratio(g, z, _Y0_YP, _Y0_YQ),
                        g.op.Mul(log_term, _j_near(g, x64, z, 0)))
    else:
        near = g.op.Add(g.op.Mul(x64, _ratio(g, z, _Y1_YP, _Y1_YQ)),
                        g.op.Sub(g.op.Mul(log_term, _j_near(g, x64, z, 1)),
                                 g.op.Div(_c(g, _TWO_OVER_PI), x64)))
    out = g.op.Where(g.op.LessOrEqual(x64, _c(g, 5.0)), near, _hankel(g, x64, order, True))
    if order == 1 and g.dtype in _LOW_PRECISION:
        # torch's float32 1/x overflows for x <= 2^-128, though Y1 itself would not yet.
        out = g.op.Where(g.op.LessOrEqual(x64, _c(g, 2.0 ** -128)), _c(g, -math.inf), out)
    out = g.op.Where(g.op.Less(x64, _c(g, 0.0)), _c(g, math.nan), out)
    return _out(g, g.op.Where(g.op.Equal(x64, _c(g, 0.0)), _c(g, -math.inf), out))


@translation(aten.special_bessel_j0.default)
def bessel_j0(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_bessel_j0(Tensor self) -> Tensor"""
    return _j(g, x, 0)


@translation(aten.special_bessel_j1.default)
def bessel_j1(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_bessel_j1(Tensor self) -> Tensor"""
    return _j(g, x, 1)


@translation(aten.special_bessel_y0.default)
def bessel_y0(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_bessel_y0(Tensor self) -> Tensor"""
    return _y(g, x, 0)


@translation(aten.special_bessel_y1.default)
def bessel_y1(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_bessel_y1(Tensor self) -> Tensor"""
    return _y(g, x, 1)


@translation(aten.special_spherical_bessel_j0.default)
def spherical_bessel_j0(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_spherical_bessel_j0(Tensor x) -> Tensor"""
    x64 = g.cast(x, F64)
    z = g.op.Mul(x64, x64)
    # sin(x)/x's Taylor series to x^12 near 0 (where sin(x)/x is 0/0), torch's cut-off.
    taylor = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(6, -1, -1)]
    near = _polevl(g, z, taylor)
    out = g.op.Where(g.op.Less(g.op.Abs(x64), _c(g, 0.5)), near,
                     g.op.Div(g.op.Sin(x64), x64))
    return _out(g, g.op.Where(g.op.IsInf(x64), _c(g, 0.0), out))


# -- Airy function ------------------------------------------------------------------------


@translation(aten.special_airy_ai.default)
def airy_ai(g: RuleContext, x: ir.Value) -> ir.Value:
    """special_airy_ai(Tensor x) -> Tensor"""
    x64 = g.cast(x, F64)
    ax = g.op.Abs(x64)
    root = g.op.Sqrt(ax)
    quarter = g.op.Sqrt(root)  # |x|^(1/4)
    two_x15 = g.op.Mul(g.op.Mul(ax, _c(g, 2.0)), root)
    zeta = g.op.Div(two_x15, _c(g, 3.0))
    inv = g.op.Reciprocal(zeta)
    # x < -2.09: sqrt(1/pi) |x|^(-1/4) (sin(t) (1 + z^2 F(z^2)) - cos(t) z G(z^2)),
    # t = zeta + pi/4, z = 1/zeta.
    inv2 = g.op.Mul(inv, inv)
    t = g.op.Add(zeta, _c(g, math.pi / 4))
    amp = g.op.Add(_c(g, 1.0), g.op.Mul(inv2, _ratio(g, inv2, _AI_AFN, _AI_AFD)))
    phase = g.op.Mul(inv, _ratio(g, inv2, _AI_AGN, _AI_AGD))
    wave = g.op.Sub(g.op.Mul(g.op.Sin(t), amp), g.op.Mul(g.op.Cos(t), phase))
    left = g.op.Div(g.op.Mul(wave, _c(g, _INV_SQRT_PI)), quarter)
    # x >= 2.09: sqrt(1/pi) A(1/zeta) / (2 x^(1/4) exp(zeta)).
    scale = g.op.Mul(g.op.Mul(quarter, _c(g, 2.0)), g.op.Exp(zeta))
    right = g.op.Div(g.op.Mul(_ratio(g, inv, _AI_AN, _AI_AD), _c(g, _INV_SQRT_PI)), scale)
    # Between: the Maclaurin series in x^3.
    cube = g.op.Mul(g.op.Mul(x64, x64), x64)
    f = _polevl(g, cube, _AI_F[::-1])
    g_series = g.op.Mul(x64, _polevl(g, cube, _AI_G[::-1]))
    middle = g.op.Sub(g.op.Mul(_c(g, _AI0), f), g.op.Mul(_c(g, _AIP0), g_series))
    out = g.op.Where(g.op.GreaterOrEqual(x64, _c(g, 2.09)), right, middle)
    out = g.op.Where(g.op.Less(x64, _c(g, -2.09)), left, out)
    if g.dtype in _LOW_PRECISION:
        # torch's float32 2|x|^(3/2) overflows below -3.07e25: sin(inf), NaN.
        out = g.op.Where(g.op.Greater(two_x15, _c(g, _F32_MAX)), _c(g, math.nan), out)
    # torch: 0 beyond 103.892 (where exp(zeta) nears float64 overflow), NaN at +-inf.
    out = g.op.Where(g.op.Greater(x64, _c(g, 103.892)), _c(g, 0.0), out)
    return _out(g, g.op.Where(g.op.IsInf(x64), _c(g, math.nan), out))
